// The demo's test wallet as the merchant's browser wallet (make demo-onchain): where the browser has no
// wallet of its own, an EIP-1193 provider (window.ethereum) whose requests go to the demo shop's
// server, which answers them for the demo merchant's payout address, a dev account the local node
// signs for. wallet.js then finds it as it finds any wallet. Loaded only on the demo merchant's
// pages while the demo's wallet is on: <script src="demo-wallet.js" data-rpc="/demo/wallet/merchant/rpc">.
(() => {
  const rpc = document.currentScript.dataset.rpc;
  if (window.ethereum || !rpc) return;  // a real wallet comes first
  window.ethereum = {
    isDemoTestWallet: true,
    request: async ({ method, params }) => {
      const response = await fetch(rpc, {
        method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ method, params: params || [] }),
      });
      const answer = await response.json();
      if (!response.ok) throw Object.assign(new Error(answer.message || "HTTP " + response.status), { code: -32603 });
      if (answer.error) throw Object.assign(new Error(answer.error.message), { code: answer.error.code });
      return answer.result;
    },
  };
})();
