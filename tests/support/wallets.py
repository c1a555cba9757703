"""Browser wallets for the Chromium tests: EIP-6963 providers injected into the page before its
scripts run, whose EIP-1193 `request()` goes through a Playwright binding to a Python bridge backed
by the Hardhat node. Each wallet keeps its own current chain (a wallet may start on another chain),
knows the chains it is told, signs typed data with its account's key (eth-account, as a wallet does)
and sends transactions from a dev account the node keeps unlocked. A refusing wallet connects, then
declines every payment request (EIP-1193 code 4001). Every request is recorded, with the chain the
wallet was on, for the tests to read what was asked in which order."""
import json

# A green square, as wallets announce their icons (a data: URI).
ICON = ("data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9"
        "IjAgMCAxMCAxMCI+PHJlY3Qgd2lkdGg9IjEwIiBoZWlnaHQ9IjEwIiBmaWxsPSIjMGE3Ii8+PC9zdmc+")
INIT_SCRIPT = """
(() => {
  const announced = %s.map((info) => Object.freeze({
    info: Object.freeze(info),
    provider: {
      request: async ({ method, params }) => {
        const answer = JSON.parse(
          await window.__testWallet(info.uuid, method, JSON.stringify(params || [])));
        if (answer.error) {
          const e = new Error(answer.error.message); e.code = answer.error.code; throw e;
        }
        return answer.result;
      },
    },
  }));
  const announce = () => announced.forEach((detail) =>
    window.dispatchEvent(new CustomEvent('eip6963:announceProvider', { detail })));
  window.addEventListener('eip6963:requestProvider', announce);
  announce();
})();
"""
REJECTED = {"code": 4001, "message": "User rejected the request."}


class TestWallet:
    def __init__(self, chain, uuid, name, icon, *, address, key=None, chain_id=31337,
                 refuses=False):
        self.chain, self.uuid, self.name, self.icon = chain, uuid, name, icon
        self.address, self.key, self.chain_id, self.refuses = address, key, chain_id, refuses
        self.known = {31337, 1}
        self.calls = []  # (method, params, the wallet's chain id when asked)

    def info(self):
        return {"uuid": self.uuid, "name": self.name, "icon": self.icon,
                "rdns": f"org.example.{self.uuid}"}

    def methods(self):
        return [method for method, _, _ in self.calls]

    def handle(self, method, params):
        self.calls.append((method, params, self.chain_id))
        if method in ("eth_requestAccounts", "eth_accounts"):
            return {"result": [self.address.lower()]}
        if method == "eth_chainId":
            return {"result": hex(self.chain_id)}
        if method == "wallet_switchEthereumChain":
            wanted = int(params[0]["chainId"], 16)
            if wanted not in self.known:
                return {"error": {"code": 4902, "message": "Unrecognized chain ID."}}
            self.chain_id = wanted
            return {"result": None}
        if self.refuses:
            return {"error": REJECTED}
        if method == "eth_sendTransaction":
            if self.chain_id != 31337:  # a real wallet would send on its own chain: never here
                return {"error": {"code": -32000, "message": "sent on the wrong chain"}}
            return {"result": self.chain.rpc("eth_sendTransaction", params[0])}
        if method == "eth_signTypedData_v4":
            from app.evm.signer import _account_class
            signed = _account_class().from_key(self.key).sign_typed_data(
                full_message=json.loads(params[1]))
            return {"result": "0x" + bytes(signed.signature).hex()}
        return {"error": {"code": 4200, "message": f"{method} is not supported."}}


def install(page, wallets):
    """Inject `wallets` into every document `page` loads."""
    by_uuid = {w.uuid: w for w in wallets}

    def bridge(uuid, method, params):
        try:
            return json.dumps(by_uuid[uuid].handle(method, json.loads(params)))
        except Exception as e:  # the node refused: a wallet error, as a wallet reports it
            return json.dumps({"error": {"code": -32603, "message": str(e)[:200]}})

    page.expose_function("__testWallet", bridge)
    page.add_init_script(INIT_SCRIPT % json.dumps([w.info() for w in wallets]))
