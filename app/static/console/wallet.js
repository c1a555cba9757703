// The merchant's browser wallet (EIP-1193, window.ethereum) sends a transaction the console built on
// the server: a refund's token transfer, or a collection's factory call. The console never sees a
// key; the wallet asks its owner to approve, and pays the gas.
//
// <button data-wallet-tx data-chain-id="31337" data-to="0x…" data-data="0x…" data-value="0x0"
//         data-result="#element-id" data-name-form="#form-id">Pay with my wallet</button>
// The element named by data-result gets the outcome: the transaction hash, or the wallet's error;
// data-no-wallet what to do instead when the browser has no wallet (where the page shows the way).
// With data-name-form, the hash is posted at once with that form (its CSRF token and a `tx_hash`
// field): a refund is named, and completes once the transaction is confirmed; a collection is
// recorded. data-named says what became of it ("named for this refund: …").
function hexChainId(chainId) {
  return "0x" + Number(chainId).toString(16);
}

async function sendFromWallet(button) {
  const out = document.querySelector(button.dataset.result);
  const show = (text, failed) => {
    out.textContent = text;
    out.classList.toggle("error", Boolean(failed));
  };
  const provider = window.ethereum;
  if (!provider || typeof provider.request !== "function") {
    show(button.dataset.noWallet || "No browser wallet in this browser: give the transaction's hash in the" +
         " field below once it is sent from another wallet.", true);
    return;
  }
  button.disabled = true;
  try {
    const [from] = await provider.request({ method: "eth_requestAccounts" });
    const wanted = hexChainId(button.dataset.chainId);
    const current = await provider.request({ method: "eth_chainId" });
    if (current.toLowerCase() !== wanted) {
      await provider.request({ method: "wallet_switchEthereumChain", params: [{ chainId: wanted }] });
    }
    const hash = await provider.request({
      method: "eth_sendTransaction",
      params: [{ from, to: button.dataset.to, data: button.dataset.data, value: button.dataset.value || "0x0" }],
    });
    show("Sent: transaction " + hash + ". The watcher records it once it is confirmed.", false);
    out.dataset.txHash = hash;
    if (button.dataset.nameForm) {
      await nameTransaction(document.querySelector(button.dataset.nameForm), hash, show, button.dataset.named);
    }
  } catch (error) {
    show("The wallet did not send it: " + (error && error.message ? error.message : String(error)), true);
  } finally {
    button.disabled = false;
  }
}

async function nameTransaction(form, hash, show, named) {
  form.elements.tx_hash.value = hash;
  try {
    const response = await fetch(form.action, {
      method: "POST", credentials: "same-origin", body: new URLSearchParams(new FormData(form)),
    });
    if (!response.ok) throw new Error("HTTP " + response.status);
    show("Sent: transaction " + hash + ", " + (named || "saved") + ".", false);
  } catch (error) {
    show("Sent: transaction " + hash + ", but it could not be saved (" + error.message +
         "): give it with the field below.", true);
  }
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-wallet-tx]");
  if (button) sendFromWallet(button);
});
