/*
 * <payment-button process-id="…" public-key="pk_test_…" [api-base="https://pay.example"] [currency="EUR"]>
 *
 * The payment button web component of the preorder service. No dependencies, no build step (ES2020),
 * no external resources (fonts, images, styles): everything lives in this file and its shadow DOM,
 * but the QR code, which the service draws (GET …/qr.svg, fetched like the API calls: showing a
 * payment address sends nothing to a third party, and the page's CSP needs nothing more).
 *
 * Attributes (all observed; changing process-id, public-key or api-base re-initialises the button):
 *   process-id  the processId the merchant backend got from POST /payment-button/process/preorder
 *   public-key  the merchant's public key (pk_test_… / pk_live_…), sent as the x-public-key header
 *   api-base    base URL of the service; default: where this script was loaded from (the origin of
 *               its src, keeping a path prefix when the src ends in /payment-button/button.js)
 *   currency    a fallback only, for a service that sends no currency (one older than prices in the
 *               merchant's currency): the ISO 4217 code the amount is in, e.g. "EUR"
 *
 * The price: the process's amount in its currency (the process's `currency`, ISO 4217), formatted
 * as people of that currency read it in the page's language (the nearest lang attribute, else
 * navigator.language) with Intl.NumberFormat, from the exact decimal string the service wrote:
 * "€19.99" on an English page, "19,99 €" on a German one.
 *
 * Paying: the stablecoins the service can quote for this process now (GET /payment-button/assets
 * ?processId=…), each network with what the customer would pay on it ("pay 21.673158 USDC"): the
 * customer picks the asset, then the network (a step with one choice is skipped), and the button
 * confirms the choice (POST …/confirm; a choice that cannot be quoted any more says why, and the
 * list is read again without it). Once chosen at a rate (not at par), a line under the price says
 * what the quote was: "19.99 EUR · pay 21.673158 USDC at 1 EUR = 1.0842 USD, 10:02 UTC". Then it
 * shows the exact amount and the address (each with a copy button), the network, a QR code of the
 * EIP-681 payment URI and a link opening it in a wallet app, and follows the payment as the service
 * sees it (polled every second while shown). Beside them, one "Pay with NAME" button per browser
 * wallet (EIP-6963 announcements; a bare EIP-1193 window.ethereum when none announces itself): the
 * wallet is switched to the payment's network, the chain id read again, and one transfer of exactly
 * what is due is asked for; for an ERC-3009 token that the service's relayer serves, "Pay without
 * gas" asks the wallet to sign the authorization instead (POST …/authorization).
 * Test-mode merchants also get the sandbox ("Simulate a payment").
 *
 * Events (CustomEvent, bubbles, composed, fired on the element):
 *   payment-success    detail: the public process {processId, status, amount, currency, expiresAt,
 *                      livemode, payment}
 *   payment-pending    detail: the public process; a transfer was seen on the chain, not yet
 *                      confirmed (once per transfer)
 *   payment-partial    detail: the public process; confirmed transfers pay less than the amount due
 *                      (once per confirmed sum)
 *   payment-failure    detail: the public process (still "pending": the customer may try again)
 *   payment-expired    detail: the public process as last read (its status may still say "pending"
 *                      when the countdown ran out before the service swept it; it can never complete)
 *   payment-cancelled  detail: the public process (the merchant cancelled it)
 *   payment-error      detail: {code, message, status} (status 0: the service could not be reached)
 * A state's event fires once per process-id shown, also when the process is already in that state
 * when the button loads (so a merchant page reloaded after payment still learns the outcome).
 *
 * Styling hooks: CSS custom properties --payment-button-accent, --payment-button-radius,
 * --payment-button-font on the element; shadow parts card, amount, quote, pay-button, test-badge,
 * outcome, methods, instructions, qr, wallets.
 *
 * Reading order: 1. constants and texts (and the shadow DOM's style and markup), 2. amounts and
 * small helpers, 3. the element's life, 4. API calls and polling, 5. rendering, per state,
 * 6. events.
 */
(() => {
  'use strict';

  const TAG = 'payment-button';
  if (!window.customElements || customElements.get(TAG)) return;

  // ==== 1. Constants and texts ===============================================================

  // document.currentScript is only set while this file first runs: capture it now.
  const SCRIPT_SRC = (document.currentScript && document.currentScript.src) || '';

  const POLL = {
    FIRST_MS: 1000, // while no instructions are shown, and after a failed read: 1 s doubling ...
    MAX_MS: 15000, // ... to 15 s
    LIVE_MS: 1000, // while payment instructions are shown: the service is followed within 2 s
    // After a live payment expired (or was cancelled) a late transfer is still shown: polled every
    // 2 s for 10 minutes (a wallet that sent at the last moment is seen within that).
    LATE_MS: 2000,
    LATE_WATCH_MS: 10 * 60 * 1000,
  };
  const COPIED_MS = 2000; // how long a copy button says "Copied"

  // ERC-3009's TransferWithAuthorization and its EIP-712 domain, as eth_signTypedData_v4 takes them.
  const EIP712_DOMAIN = [{ name: 'name', type: 'string' }, { name: 'version', type: 'string' },
    { name: 'chainId', type: 'uint256' }, { name: 'verifyingContract', type: 'address' }];
  const AUTHORIZATION = [{ name: 'from', type: 'address' }, { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' }, { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' }, { name: 'nonce', type: 'bytes32' }];

  // The final states: the event each fires, its icon (SVG content) and what the customer reads.
  const FINAL = {
    completed: {
      event: 'payment-success', icon: '<path d="M6 12.5l4 4 8-9"/>', title: 'Payment received',
      text: (amount) => `Thank you. ${amount} has been paid.`,
    },
    expired: {
      event: 'payment-expired', icon: '<circle cx="12" cy="12" r="8"/><path d="M12 8v4.5l3 2"/>',
      title: 'Payment expired', text: () => 'This payment request has expired. Please start a new order.',
    },
    cancelled: {
      event: 'payment-cancelled', icon: '<path d="M8 8l8 8M16 8l-8 8"/>', title: 'Payment cancelled',
      text: () => 'This payment request was cancelled by the merchant.',
    },
  };

  // Every other text the button writes (the template below holds the fixed labels).
  const TEXT = {
    payment: 'Payment',
    amountLabel: (status) => (status === 'completed' ? 'Amount paid' : FINAL[status] ? 'Amount' : 'Amount due'),
    needsAttributes: 'This payment button needs its process-id and public-key attributes.',
    unreachable: 'The payment service could not be reached. Check your connection and try again.',
    httpStatus: (status) => `The payment service answered with status ${status}.`,
    unexpected: 'The payment service sent an unexpected answer.',
    noMethod: 'No payment method is available for this payment yet. Please contact the merchant.',
    pay: (amount) => `Pay ${amount}`,
    sandbox: 'Simulate a payment (test mode)',
    sandboxFailed: 'Payment failed. No money was taken. You can try again.',
    expiresIn: (clock) => `Expires in ${clock}`,
    expired: 'Expired',
    payWith: 'Pay with',
    payWithOn: (symbol) => `Pay with ${symbol} on`,
    assetOn: (symbol, network) => `${symbol} on ${network}`,
    payAmount: (amount, symbol) => `pay ${amount} ${symbol}`,
    // The quote under the price: "19.99 EUR · pay 21.673158 USDC at 1 EUR = 1.0842 USD, 10:02 UTC".
    quote: (price, pay, rate) => (rate ? `${price} · ${pay} at ${rate}` : `${price} · ${pay}`),
    rate: (base, value, quote, time) => `1 ${base} = ${value} ${quote}${time ? `, ${time}` : ''}`,
    rateTime: (day, hhmm) => (day ? `${day} ${hhmm} UTC` : `${hhmm} UTC`),
    back: 'Back',
    keepChoice: 'Keep the current choice',
    preparing: 'Preparing your payment…',
    sendExactly: 'Send exactly',
    sendRemaining: 'Send the remaining',
    network: (name, chainId) => (Number.isInteger(chainId) ? `${name} (chain ${chainId})` : name),
    qrLabel: (amount, address) => `QR code for a wallet app: ${amount} to ${address}`,
    onlyThis: (symbol, network) => `Send only ${symbol} on ${network}: other tokens or networks are not credited to this payment.`,
    waiting: (amount) => `Waiting for your payment of ${amount}…`,
    checkingInTime: 'Checking for a payment made in time…',
    seen: (k, required) => `Payment seen, waiting for confirmations (${required === null ? `${k} so far` : `${k} of ${required}`}).`,
    seenFinal: 'Payment seen, waiting for the network to make it final.',
    delayed: (network) => `${network} is delayed: a payment sent is credited once it is back.`,
    sendRest: (received, due, remaining, symbol) => `Received ${received} of ${due} ${symbol}: send the remaining ${remaining} ${symbol}.`,
    overpaid: (over, symbol) => ` That is ${over} ${symbol} more than due: the merchant will contact you about it.`,
    paidLate: 'Paid after expiry',
    arrivedLate: (amount, status) => `${amount} arrived after this payment request ${status === 'expired' ? 'expired' : 'was cancelled'}: the merchant will contact you.`,
    arrivedShort: (received, due, symbol) => `${received} of ${due} ${symbol} arrived, but the payment was not completed: the merchant will contact you.`,
    // Browser wallets (EIP-6963, or a bare window.ethereum)
    walletsTitle: 'Or pay from a browser wallet',
    payWithWallet: (name) => `Pay with ${name}`,
    browserWallet: 'browser wallet',
    payGasless: 'Pay without gas',
    payGaslessWith: (name) => `Pay with ${name} without gas`,
    walletOpen: (name) => `Confirm in ${name}…`,
    walletSwitch: (network, chainId) => `Switching ${network} (chain ${chainId}) on in your wallet…`,
    walletUnknownChain: (network, chainId) => `Your wallet does not know ${network} (chain id ${chainId}). Add that network to your wallet, then try again, or send with the address and QR code. Nothing was sent.`,
    walletWrongChain: (network, chainId) => `Your wallet is not on ${network} (chain id ${chainId}): switch it to that network and try again. Nothing was sent.`,
    walletRejected: 'You declined the request in your wallet. Nothing was sent.',
    walletBusy: 'Your wallet already has a request open: finish or close it there, then try again.',
    walletNoAccount: 'The wallet gave no account to pay from. Nothing was sent.',
    walletFailed: (message) => `The wallet reported an error: ${message} Nothing was sent.`,
    walletNothingLeft: 'Nothing is left to pay.',
    walletSent: (hash) => `Transaction sent: ${hash}. Waiting for it on the network…`,
    copy: 'Copy',
    copied: 'Copied',
    copyFailed: 'Copy failed',
    copiedSaid: (what) => `${what} copied`,
    copyFailedSaid: (what) => `${what} could not be copied: select it and copy it by hand`,
  };

  // The shadow DOM: its style sheet and markup (fixed labels included).
  const STYLE = `
:host { display: block; max-width: 400px; color: #111827; line-height: 1.45;
  font-family: var(--payment-button-font, system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif);
  --accent: var(--payment-button-accent, #4338ca); --radius: var(--payment-button-radius, 12px); }
:host([hidden]) { display: none; }
*, *::before, *::after { box-sizing: border-box; }
[hidden] { display: none !important; }
.card { background: #fff; border: 1px solid #e5e7eb; border-radius: var(--radius); padding: 20px;
  box-shadow: 0 1px 2px rgba(16, 24, 40, .05), 0 4px 16px rgba(16, 24, 40, .06); }
.top { display: flex; align-items: center; justify-content: space-between; gap: 8px; min-height: 24px; }
.label { font-size: 13px; font-weight: 600; letter-spacing: .04em; text-transform: uppercase; color: #6b7280; }
.badge { font-size: 12px; font-weight: 700; letter-spacing: .05em; color: #92400e; background: #fef3c7;
  border: 1px solid #fcd34d; border-radius: 999px; padding: 1px 10px; white-space: nowrap; }
.amount { margin: 4px 0 2px; font-size: 32px; font-weight: 700; letter-spacing: -.01em;
  font-variant-numeric: tabular-nums; overflow-wrap: anywhere; }
.currency { font-size: 18px; font-weight: 600; color: #4b5563; margin-left: 4px; }
.quote { margin: 0 0 4px; font-size: 14px; color: #4b5563; font-variant-numeric: tabular-nums; overflow-wrap: anywhere; }
.countdown { margin: 0 0 16px; font-size: 14px; color: #4b5563; font-variant-numeric: tabular-nums; }
.countdown.urgent { color: #b91c1c; font-weight: 600; }
.loading { margin: 8px 0; color: #6b7280; }
button { font: inherit; cursor: pointer; border-radius: 8px; min-height: 44px; padding: 10px 16px; width: 100%;
  font-weight: 600; border: 1px solid transparent; transition: background-color .15s, box-shadow .15s; }
button:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
button:disabled { cursor: not-allowed; }
.pay { background: var(--accent); color: #fff; font-size: 17px; min-height: 48px; }
.pay:hover:not(:disabled) { filter: brightness(1.12); }
.pay:disabled { background: #e5e7eb; color: #6b7280; }
.note { margin: 10px 0 0; font-size: 14px; color: #4b5563; }
.notice { margin: 14px 0 0; padding: 10px 12px; border-radius: 8px; font-size: 14px; border: 1px solid; }
.notice.failure, .notice.error { background: #fef2f2; border-color: #fecaca; color: #991b1b; }
.notice:empty { display: none; }
.retry { margin-top: 10px; background: #fff; border-color: #d1d5db; color: #111827; }
.outcome { display: flex; gap: 12px; align-items: flex-start; margin-top: 12px; outline: none; }
.outcome-icon { flex: none; width: 40px; height: 40px; border-radius: 50%; display: grid; place-items: center; }
.outcome-icon svg { width: 24px; height: 24px; fill: none; stroke: currentColor; stroke-width: 2.4;
  stroke-linecap: round; stroke-linejoin: round; }
.outcome.completed .outcome-icon { background: #dcfce7; color: #15803d; }
.outcome.expired .outcome-icon { background: #fef3c7; color: #b45309; }
.outcome.cancelled .outcome-icon { background: #f3f4f6; color: #4b5563; }
.outcome-title { margin: 0; font-size: 17px; font-weight: 700; }
.outcome-text { margin: 2px 0 0; font-size: 14px; color: #4b5563; }
dialog { border: none; border-radius: var(--radius); padding: 0; width: min(420px, calc(100vw - 24px));
  max-height: calc(100vh - 24px); overflow: auto; color: inherit; font: inherit;
  box-shadow: 0 20px 50px rgba(15, 23, 42, .3); }
dialog::backdrop { background: rgba(15, 23, 42, .55); }
.sandbox-banner { margin: 0; padding: 8px 16px; font-size: 13px; font-weight: 700; letter-spacing: .06em;
  color: #78350f; text-align: center; border-bottom: 1px solid #fcd34d;
  background: repeating-linear-gradient(-45deg, #fde68a 0 12px, #fcd34d 12px 24px); }
.dialog-body { padding: 20px; }
.dialog-body h2 { margin: 0 0 6px; font-size: 19px; }
.dialog-body p { margin: 0 0 16px; font-size: 14px; color: #4b5563; }
.actions { display: grid; gap: 10px; }
.sim-success { background: #15803d; color: #fff; }
.sim-success:hover:not(:disabled) { background: #166534; }
.sim-failure { background: #fff; color: #b91c1c; border-color: #fca5a5; }
.sim-failure:hover:not(:disabled) { background: #fef2f2; }
.close { background: transparent; color: #374151; margin-top: 6px; }
.close:hover:not(:disabled) { background: #f3f4f6; }
.actions button:disabled { opacity: .6; }
.busy { display: flex; align-items: center; gap: 8px; margin-top: 12px; font-size: 14px; color: #4b5563; }
.spinner { width: 16px; height: 16px; border-radius: 50%; border: 2px solid #d1d5db; border-top-color: var(--accent);
  animation: spin .8s linear infinite; }
@keyframes spin { to { transform: rotate(360deg); } }
.pay.secondary { background: #fff; color: #374151; border-color: #d1d5db; font-size: 15px; min-height: 44px; margin-top: 12px; }
.pay.secondary:hover:not(:disabled) { filter: none; background: #f9fafb; }
.step-title { margin: 0 0 10px; font-size: 15px; font-weight: 700; outline: none; }
.choices { display: grid; gap: 8px; }
.choice { display: flex; justify-content: space-between; align-items: center; gap: 8px; text-align: left;
  background: #fff; color: #111827; border-color: #d1d5db; }
.choice:hover:not(:disabled) { border-color: var(--accent); background: #f5f5ff; }
.choice .sub { font-weight: 400; font-size: 13px; color: #6b7280; }
.choice > :first-child { flex: 1 1 0; min-width: 0; }
.choice .side { flex: 0 1 auto; max-width: 60%; display: grid; justify-items: end; text-align: right; }
.choice .due { font-size: 13px; font-weight: 600; color: #111827; font-variant-numeric: tabular-nums; overflow-wrap: anywhere; }
.link { width: auto; min-height: 44px; padding: 8px 4px; background: none; border: none; color: var(--accent);
  font-weight: 600; text-decoration: underline; }
.instructions { margin-top: 4px; }
.send-title { margin: 0; font-size: 13px; font-weight: 600; letter-spacing: .04em; text-transform: uppercase;
  color: #6b7280; outline: none; }
.copy-row { display: flex; align-items: center; gap: 8px; margin: 2px 0 10px; }
.copy-row > :first-child { flex: 1; min-width: 0; }
.send-amount { font-size: 24px; font-weight: 700; font-variant-numeric: tabular-nums; overflow-wrap: anywhere; }
.address { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px; overflow-wrap: anywhere;
  background: #f3f4f6; border-radius: 6px; padding: 6px 8px; }
.copy { width: auto; flex: none; min-width: 76px; padding: 8px 12px; background: #fff; color: #111827; border-color: #d1d5db; font-size: 14px; }
.copy:hover:not(:disabled) { background: #f3f4f6; }
.field { margin: 0; font-size: 13px; color: #6b7280; }
.network { margin: 0 0 10px; font-size: 15px; font-weight: 600; }
.qr { display: block; width: 196px; max-width: 100%; margin: 6px auto 4px; aspect-ratio: 1; }
.qr svg { display: block; width: 100%; height: 100%; }
.wallet { display: block; text-align: center; margin: 4px 0 8px; color: var(--accent); font-weight: 600; }
.wallet:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.warning { margin: 8px 0 0; font-size: 13px; color: #92400e; }
.pay-status { margin: 0 0 12px; padding: 10px 12px; border-radius: 8px; background: #eef2ff; color: #1e1b4b; font-size: 14px; }
.pay-status:empty { display: none; }
.pay-status.seen { background: #ecfdf5; color: #065f46; }
.pay-status.partial, .pay-status.late { background: #fffbeb; color: #78350f; }
.wallets { margin: 4px 0 10px; }
.wallet-list { display: grid; gap: 8px; margin-top: 4px; }
.wallet-row { display: flex; flex-wrap: wrap; gap: 8px; }
.wallet-row .pay-wallet { flex: 1 1 12em; }
.wallet-row button { display: flex; align-items: center; justify-content: center; gap: 8px; background: #fff;
  color: #111827; border-color: #d1d5db; }
.wallet-row button:hover:not(:disabled) { border-color: var(--accent); background: #f5f5ff; }
.wallet-row .gasless { width: auto; flex: 1 1 auto; font-size: 14px; }
.wallet-row img { width: 20px; height: 20px; flex: none; }
.wallet-tx { margin: 10px 0 0; font-size: 14px; color: #1e1b4b; overflow-wrap: anywhere; }
.sr-only { position: absolute; width: 1px; height: 1px; margin: -1px; padding: 0; overflow: hidden; clip: rect(0 0 0 0); border: 0; }
@media (max-width: 360px) { .card { padding: 16px; } .amount { font-size: 28px; } .send-amount { font-size: 21px; } }
@media (prefers-reduced-motion: reduce) {
  *, *::before, *::after, dialog::backdrop { animation: none !important; transition: none !important; }
}`;

  const TEMPLATE = `
<style>${STYLE}</style>
<section class="card" part="card" aria-label="Payment">
  <div class="top">
    <span class="label" id="amount-label">Payment</span>
    <span class="badge" part="test-badge" hidden>TEST MODE</span>
  </div>
  <p class="loading">Loading payment…</p>
  <p class="amount" part="amount" aria-labelledby="amount-label" hidden><span class="amount-value"></span><span class="currency"></span></p>
  <p class="quote" part="quote" hidden></p>
  <p class="countdown" role="timer" hidden></p>
  <div class="live" role="status" aria-live="polite"><p class="pay-status"></p><p class="notice" hidden></p><p class="wallet-tx" hidden></p><span class="copied sr-only"></span><div class="outcome" part="outcome" tabindex="-1" hidden><span class="outcome-icon" aria-hidden="true"><svg viewBox="0 0 24 24"></svg></span><div><p class="outcome-title"></p><p class="outcome-text"></p></div></div></div>
  <div class="methods" part="methods" hidden>
    <p class="step-title" id="step-title" tabindex="-1"></p>
    <div class="choices" role="group" aria-labelledby="step-title"></div>
    <button type="button" class="link back" hidden>Back</button>
  </div>
  <div class="instructions" part="instructions" hidden>
    <div class="send">
      <h3 class="send-title" tabindex="-1">Send exactly</h3>
      <div class="copy-row"><span class="send-amount"></span><button type="button" class="copy copy-amount">Copy<span class="sr-only"> amount</span></button></div>
      <p class="field">Network</p>
      <p class="network"></p>
      <p class="field">To this address</p>
      <div class="copy-row"><code class="address"></code><button type="button" class="copy copy-address">Copy<span class="sr-only"> address</span></button></div>
      <div class="qr" part="qr" role="img"></div>
      <a class="wallet" href="#">Open in a wallet app</a>
      <div class="wallets" part="wallets" hidden><p class="field" id="wallets-title">Or pay from a browser wallet</p><div class="wallet-list" role="group" aria-labelledby="wallets-title"></div></div>
      <p class="warning"></p>
    </div>
    <button type="button" class="link change" hidden>Choose another coin or network</button>
  </div>
  <button type="button" class="pay" part="pay-button" hidden>Pay</button>
  <p class="note" hidden></p>
  <button type="button" class="retry" hidden>Try again</button>
</section>
<dialog aria-labelledby="dlg-title" aria-describedby="dlg-desc">
  <p class="sandbox-banner">TEST MODE · SANDBOX</p>
  <div class="dialog-body">
    <h2 id="dlg-title">Simulate a payment</h2>
    <p id="dlg-desc">No real money moves. Choose the outcome the payment service records for <strong class="dlg-amount"></strong>.</p>
    <div class="actions">
      <button type="button" class="sim-success">Simulate successful payment</button>
      <button type="button" class="sim-failure">Simulate failed payment</button>
      <button type="button" class="close">Cancel</button>
    </div>
    <p class="busy" role="status" hidden><span class="spinner" aria-hidden="true"></span>Processing…</p>
  </div>
</dialog>`;

  // ==== 2. Amounts and small helpers =========================================================

  // The amount exactly as the service wrote it: its JSON token from the raw body (never through
  // float arithmetic); String(number) only if the token cannot be found.
  function amountText(raw, parsed) {
    const m = /"amount"\s*:\s*(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/.exec(raw);
    if (m && Number(m[1]) === parsed) return plainDecimal(m[1]);
    return plainDecimal(String(parsed));
  }

  // "1.5e-3" -> "0.0015", by moving the decimal point in the digit string.
  function plainDecimal(token) {
    const m = /^(-?)(\d+)(?:\.(\d+))?[eE]([+-]?\d+)$/.exec(token);
    if (!m) return token;
    const exp = parseInt(m[4], 10);
    if (Math.abs(exp) > 40) return token;
    let digits = m[2] + (m[3] || '');
    let point = m[2].length + exp;
    if (point <= 0) { digits = '0'.repeat(1 - point) + digits; point = 1; }
    if (point > digits.length) digits += '0'.repeat(point - digits.length);
    const intPart = digits.slice(0, point).replace(/^0+(?=\d)/, '');
    const fracPart = digits.slice(point);
    return m[1] + intPart + (fracPart ? '.' + fracPart : '');
  }

  // Token amounts are decimal strings ("12.34"): exact arithmetic on them through BigInt.
  function dec(text) {
    const m = /^(\d+)(?:\.(\d+))?$/.exec(typeof text === 'string' ? text : '');
    if (!m) return null;
    return { units: BigInt(m[1] + (m[2] || '')), scale: (m[2] || '').length };
  }

  /** a + sign * b as a decimal string, exact; null when either is not a decimal string. */
  function decAdd(a, b, sign = 1) {
    const x = dec(a);
    const y = dec(b);
    if (!x || !y) return null;
    const scale = Math.max(x.scale, y.scale);
    const at = (d) => d.units * 10n ** BigInt(scale - d.scale);
    const units = at(x) + BigInt(sign) * at(y);
    const digits = (units < 0n ? -units : units).toString().padStart(scale + 1, '0');
    const int = digits.slice(0, digits.length - scale);
    const frac = digits.slice(digits.length - scale).replace(/0+$/, '');
    return (units < 0n ? '-' : '') + int + (frac ? '.' + frac : '');
  }

  function decCmp(a, b) { // -1, 0 or 1; NaN when either is not a decimal string
    const d = decAdd(a, b, -1);
    if (d === null) return NaN;
    return d.startsWith('-') ? -1 : d === '0' ? 0 : 1;
  }

  /** What a payment has received so far (confirmed or not) and what is still to send (0 once
   * the amount is covered: more than due is an overpayment, never a negative amount to send). */
  function paymentSums(payment) {
    const received = decAdd(payment.amountPaid, payment.amountPending) || '0';
    const rest = decAdd(payment.amountDue, received, -1);
    return { received, remaining: rest === null ? payment.amountDue : rest.startsWith('-') ? '0' : rest };
  }

  function transfersOf(payment) { return Array.isArray(payment.transfers) ? payment.transfers : []; }

  // -- Prices in the merchant's currency --

  /** The price as people of its currency read it ("€19.99", "19,99 €"), in the first of `languages`
   * Intl accepts (else the browser's own): Intl.NumberFormat formats the decimal string itself,
   * exactly, never through a float, with the currency's usual places and never fewer than the
   * amount has. null when Intl refuses the currency (not a three-letter code). */
  function formatPrice(amount, currency, languages) {
    const places = (amount.split('.')[1] || '').length;
    for (const language of [...languages, undefined]) {
      try {
        const options = { style: 'currency', currency };
        const usual = new Intl.NumberFormat(language, options).resolvedOptions();
        if (places > usual.maximumFractionDigits) {
          options.minimumFractionDigits = usual.minimumFractionDigits;
          options.maximumFractionDigits = Math.min(places, 100);
        }
        return new Intl.NumberFormat(language, options).format(amount);
      } catch (_) { /* a malformed language tag: the next one (a malformed currency fails each time) */ }
    }
    return null;
  }

  /** "pay 21.673158 USDC": what these networks of the asset would cost the customer (the amountDue
   * the service lists for a process), when they agree; '' without it. */
  function dueText(asset, networks) {
    const dues = new Set(networks.map((n) => n.amountDue));
    const [due] = dues;
    return dues.size === 1 && dec(due) ? TEXT.payAmount(due, asset.symbol) : '';
  }

  /** The line under the price for a payment quoted at a rate (the payment's `quote`): the price, what
   * to pay in the token, the pair's rate as it reads ("1 EUR = 1.0842 USD", whichever way the amount
   * due was worked out) and its time; '' at par or without a quote (an older service). */
  function quoteText(payment, symbol) {
    const q = payment.quote;
    if (!q || typeof q !== 'object' || q.source === 'par' || typeof q.amount !== 'string'
        || typeof q.currency !== 'string') return '';
    const pair = typeof q.pair === 'string' ? q.pair.split('/') : [];
    const rate = pair.length === 2 && typeof q.rate === 'string'
      ? TEXT.rate(pair[0], q.rate, pair[1], utcTime(q.rateUpdatedAt, q.quotedAt)) : '';
    return TEXT.quote(`${q.amount} ${q.currency}`, TEXT.payAmount(payment.amountDue, symbol), rate);
  }

  /** An ISO 8601 time as "10:02 UTC", its date before it when that is not the day of `reference`
   * ("2026-11-27 23:40 UTC" for a rate read the day before the quote); '' when it cannot be read. */
  function utcTime(iso, reference) {
    const at = typeof iso === 'string' ? new Date(iso) : null;
    if (!at || Number.isNaN(at.getTime())) return '';
    const day = at.toISOString().slice(0, 10);
    const ref = typeof reference === 'string' ? new Date(reference) : null;
    const sameDay = ref && !Number.isNaN(ref.getTime()) && ref.toISOString().slice(0, 10) === day;
    return TEXT.rateTime(sameDay ? '' : day, at.toISOString().slice(11, 16));
  }

  // -- Browser wallets: EIP-6963 discovery (each wallet announces itself), a bare EIP-1193
  // window.ethereum when none does. A wallet announced twice keeps its first announcement.
  const WALLETS = new Map(); // uuid -> {name, icon, provider}
  const WALLET_LISTENERS = new Set(); // the buttons on the page: redrawn when a wallet announces itself
  window.addEventListener('eip6963:announceProvider', (event) => {
    const detail = event.detail;
    const info = detail && detail.info;
    if (!info || typeof info.uuid !== 'string' || typeof info.name !== 'string' || !info.name.trim()
        || !detail.provider || typeof detail.provider.request !== 'function' || WALLETS.has(info.uuid)) return;
    WALLETS.set(info.uuid, { name: info.name.trim().slice(0, 60), icon: info.icon, provider: detail.provider });
    for (const button of WALLET_LISTENERS) button._renderWallets();
  });
  window.dispatchEvent(new Event('eip6963:requestProvider'));

  function browserWallets() {
    if (WALLETS.size) return [...WALLETS.values()];
    const injected = window.ethereum;
    return injected && typeof injected.request === 'function' ? [{ name: TEXT.browserWallet, icon: '', provider: injected }] : [];
  }

  // A wallet's icon, as an <img> only when it is a data:image/ URI (never markup, never a remote URL).
  function walletIcon(icon) {
    if (typeof icon !== 'string' || !/^data:image\/[a-z0-9.+-]+[;,]/i.test(icon)) return null;
    const img = document.createElement('img');
    img.src = icon;
    img.alt = '';
    return img;
  }

  // The call data of the token's transfer(to, units): selector a9059cbb, then two ABI words.
  function transferData(to, units) {
    return `0xa9059cbb${to.slice(2).toLowerCase().padStart(64, '0')}${units.toString(16).padStart(64, '0')}`;
  }

  // What is still due in base units: the service's EIP-681 URI asks for exactly that.
  function outstandingUnits(payment) {
    const m = /[?&]uint256=(\d+)(?:&|$)/.exec(typeof payment.paymentUri === 'string' ? payment.paymentUri : '');
    return m ? BigInt(m[1]) : 0n;
  }

  function sameChain(reported, wanted) {
    try { return BigInt(reported) === BigInt(wanted); } catch (_) { return false; }
  }

  function randomNonce() {
    const bytes = crypto.getRandomValues(new Uint8Array(32));
    return `0x${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
  }

  class WalletError extends Error {}

  // What the payer reads when a wallet request did not go through (EIP-1193's codes).
  function walletMessage(err) {
    if (err instanceof WalletError || err instanceof ApiError) return err.message;
    const code = err && err.code;
    if (code === 4001) return TEXT.walletRejected;
    if (code === -32002) return TEXT.walletBusy;
    const text = err && typeof err.message === 'string' && err.message ? err.message : String(err);
    return TEXT.walletFailed(text.endsWith('.') ? text : `${text}.`);
  }

  // The transfers still confirming (all of them while the required depth is unknown).
  function unconfirmed(transfers, required) {
    return transfers.filter((t) => required === null || t.confirmations < required);
  }

  function clockText(seconds) {
    const h = Math.floor(seconds / 3600);
    const m = Math.floor((seconds % 3600) / 60);
    const s = seconds % 60;
    const pad = (n) => String(n).padStart(2, '0');
    return h ? `${h}:${pad(m)}:${pad(s)}` : `${m}:${pad(s)}`;
  }

  // The service's base URL when api-base is not set: the script's origin, keeping a path prefix.
  function defaultBase() {
    const servedPath = '/payment-button/button.js';
    if (!SCRIPT_SRC) return window.location.origin;
    const url = new URL(SCRIPT_SRC, window.location.href);
    if (url.pathname.endsWith(servedPath)) return url.origin + url.pathname.slice(0, -servedPath.length);
    return url.origin;
  }

  function hide(...elements) { for (const e of elements) e.hidden = true; }

  // A choice: its text, and on its side the asset's name (sub) over what it costs (due), each if any.
  function choiceButton(text, sub, due, onClick) {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'choice';
    const main = document.createElement('span');
    main.textContent = text;
    b.append(main);
    const side = document.createElement('span');
    side.className = 'side';
    for (const [className, line] of [['sub', sub], ['due', due]]) {
      if (!line) continue;
      const s = document.createElement('span');
      s.className = className;
      s.textContent = line;
      side.append(s);
    }
    if (side.firstChild) b.append(side);
    b.addEventListener('click', onClick);
    return b;
  }

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  /** A service answer as {process, amount} (expect 'status') or {data} (expect 'data'); else throws. */
  function answerOf(res, text, expect) {
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
    if (!res.ok) {
      const code = data && typeof data.code === 'string' ? data.code : `http_${res.status}`;
      const message = data && typeof data.message === 'string' && data.message ? data.message : TEXT.httpStatus(res.status);
      throw new ApiError(res.status, code, message);
    }
    if (!data || typeof data !== 'object' || !(expect in data)) {
      throw new ApiError(res.status, 'invalid_response', TEXT.unexpected);
    }
    if (expect !== 'status') return { data };
    return { process: data, amount: amountText(text, data.amount) };
  }

  class PaymentButton extends HTMLElement {
    // ==== 3. The element's life: attributes, (re)initialisation ==============================

    static get observedAttributes() { return ['process-id', 'public-key', 'api-base', 'currency']; }

    constructor() {
      super();
      const root = this.attachShadow({ mode: 'open' });
      root.innerHTML = TEMPLATE;
      const $ = (sel) => root.querySelector(sel);
      this._el = {
        label: $('.label'), badge: $('.badge'), loading: $('.loading'), amount: $('.amount'), amountValue: $('.amount-value'),
        currency: $('.currency'), quote: $('.quote'), countdown: $('.countdown'), pay: $('.pay'), note: $('.note'),
        notice: $('.notice'), outcome: $('.outcome'), outcomeIcon: $('.outcome-icon svg'),
        outcomeTitle: $('.outcome-title'), outcomeText: $('.outcome-text'), retry: $('.retry'),
        dialog: $('dialog'), dlgAmount: $('.dlg-amount'), success: $('.sim-success'),
        failure: $('.sim-failure'), close: $('.close'), busy: $('.busy'),
        methods: $('.methods'), stepTitle: $('.step-title'), choices: $('.choices'), back: $('.back'),
        instructions: $('.instructions'), send: $('.send'), sendTitle: $('.send-title'), sendAmount: $('.send-amount'),
        copyAmount: $('.copy-amount'), network: $('.network'), address: $('.address'), copyAddress: $('.copy-address'),
        qr: $('.qr'), wallet: $('.wallet'), warning: $('.warning'), change: $('.change'),
        payStatus: $('.pay-status'), copied: $('.copied'), wallets: $('.wallets'), walletList: $('.wallet-list'),
        walletTx: $('.wallet-tx'),
      };
      this._gen = 0; // bumped on each (re)initialisation: answers to an older one are dropped
      this._process = null;
      this._amountText = '';
      this._clockOffset = 0; // server time minus local time, in ms (from the Date response header)
      this._onVisibility = () => this._visibilityChanged();

      const el = this._el;
      el.pay.addEventListener('click', () => this._openDialog());
      el.success.addEventListener('click', () => this._simulate('success'));
      el.failure.addEventListener('click', () => this._simulate('failure'));
      el.close.addEventListener('click', () => el.dialog.close());
      el.retry.addEventListener('click', () => this._init());
      el.back.addEventListener('click', () => this._back());
      el.change.addEventListener('click', () => this._showChoices(null, true));
      el.copyAmount.addEventListener('click', () => this._copy(el.copyAmount, this._sendText, 'Amount'));
      el.copyAddress.addEventListener('click', () => this._copy(el.copyAddress, el.address.textContent, 'Address'));
      // Esc closes the native <dialog> (its "cancel" event), except while a payment is being recorded.
      el.dialog.addEventListener('cancel', (e) => { if (this._busy) e.preventDefault(); });
      el.dialog.addEventListener('close', () => this._dialogClosed());
    }

    /** The last public process read from the service (null before the first answer). */
    get process() {
      if (!this._process) return null;
      return typeof structuredClone === 'function' ? structuredClone(this._process) : JSON.parse(JSON.stringify(this._process));
    }

    connectedCallback() {
      document.addEventListener('visibilitychange', this._onVisibility);
      WALLET_LISTENERS.add(this);
      this._scheduleInit();
    }

    disconnectedCallback() {
      document.removeEventListener('visibilitychange', this._onVisibility);
      WALLET_LISTENERS.delete(this);
      this._teardown();
    }

    attributeChangedCallback(name, oldValue, newValue) {
      if (oldValue === newValue) return;
      if (name === 'currency') { this._renderAmount(); return; }
      if (this.isConnected) this._scheduleInit();
    }

    // Several attributes set in one task re-initialise once.
    _scheduleInit() {
      if (this._initQueued) return;
      this._initQueued = true;
      queueMicrotask(() => {
        this._initQueued = false;
        if (this.isConnected) this._init();
      });
    }

    _teardown() {
      this._gen += 1;
      if (this._abort) this._abort.abort();
      this._stopTimers();
      this._pollInFlight = false;
      this._busy = false;
      if (this._el.dialog.open) this._el.dialog.close();
    }

    _init() {
      this._teardown();
      this._abort = new AbortController();
      this._process = null; // the public process as last read
      this._amountText = ''; // its amount, exactly as the service wrote it
      this._final = null; // 'completed' | 'expired' | 'cancelled' once shown as final
      this._expiring = false; // the countdown ran out, the service has not said final yet
      this._assets = []; // what the customer may pay with (GET /payment-button/assets?processId=…)
      this._asset = null; // the asset whose networks are offered
      this._choosing = false; // the asset/network choice is shown (instead of the instructions)
      this._confirming = false; // a POST …/confirm is under way
      this._lateUntil = 0; // after an expired/cancelled live payment: poll for late transfers until then
      this._pollFailed = false;
      this._seenTransfers = new Set(); // for payment-pending: once per transfer
      this._partialSums = new Set(); // for payment-partial: once per confirmed sum
      this._walletBusy = false; // a wallet request is under way
      this._walletKey = ''; // what the wallet buttons were last drawn for
      this._resetView();

      this._id = (this.getAttribute('process-id') || '').trim();
      this._key = (this.getAttribute('public-key') || '').trim();
      this._base = ((this.getAttribute('api-base') || '').trim() || defaultBase()).replace(/\/+$/, '');
      if (!this._id || !this._key) {
        this._loadFailed(new ApiError(0, 'invalid_configuration', TEXT.needsAttributes), false);
        return;
      }
      this._call(this._fetchStart(), ([r, assets]) => {
        this._assets = assets;
        this._el.loading.hidden = true;
        this._apply(r);
        this._schedulePoll(true);
      }, (err) => this._loadFailed(err, err.status === 0 || err.status === 429 || err.status >= 500));
    }

    // ==== 4. API calls and polling ===========================================================

    /** Runs onAnswer / onError unless the button was re-initialised meanwhile or the call aborted. */
    _call(promise, onAnswer, onError) {
      const gen = this._gen;
      promise.then((r) => { if (gen === this._gen) onAnswer(r); },
        (err) => { if (gen === this._gen && err.name !== 'AbortError') onError(err); });
    }

    _path(suffix) { return `/payment-button/process/${encodeURIComponent(this._id)}/${suffix}`; }

    _fetchPublic() { return this._request('GET', this._path('public')); }

    // The process, then what the customer may pay with when it matters: for a pending process, or
    // to name what a payment was made in. Without the list (an older service, a failure) the button
    // still works: the sandbox in test mode, ids for names.
    async _fetchStart() {
      const r = await this._fetchPublic();
      let assets = [];
      if (r.process.status === 'pending' || r.process.payment) {
        assets = await this._fetchAssets().catch((err) => (err.name === 'AbortError' ? Promise.reject(err) : []));
      }
      return [r, assets];
    }

    // For this process: only what can be quoted for it now, each network with its amountDue (an
    // older service ignores the query and lists everything, without amounts).
    async _fetchAssets() {
      const path = `/payment-button/assets?processId=${encodeURIComponent(this._id)}`;
      const { data } = await this._request('GET', path, undefined, 'data');
      const list = Array.isArray(data.data) ? data.data : [];
      return list.filter((a) => a && typeof a.id === 'string' && Array.isArray(a.networks))
        .map((a) => ({ ...a, networks: a.networks.filter((n) => n && typeof n.id === 'string') }))
        .filter((a) => a.networks.length > 0);
    }

    // `expect`: the field an answer must have ('status' for a process, 'data' for a list).
    async _request(method, path, body, expect = 'status') {
      const headers = { 'x-public-key': this._key, Accept: 'application/json' };
      if (body !== undefined) headers['Content-Type'] = 'application/json';
      const sentAt = Date.now();
      let res;
      let text;
      try {
        res = await fetch(this._base + path, {
          method, headers, body, mode: 'cors', credentials: 'omit', cache: 'no-store',
          signal: this._abort.signal,
        });
        text = await res.text();
      } catch (err) {
        if (err.name === 'AbortError') throw err;
        throw new ApiError(0, 'network_error', TEXT.unreachable);
      }
      this._noteServerTime(res.headers.get('Date'), sentAt, Date.now());
      return answerOf(res, text, expect);
    }

    // The countdown runs on the server's clock: the Date header (whole seconds, so +500 ms puts it
    // mid-second) against the middle of the request's round trip. Cross-origin, the service must
    // list Date in Access-Control-Expose-Headers; without it the local clock is used.
    _noteServerTime(dateHeader, sentAt, receivedAt) {
      const server = dateHeader ? Date.parse(dateHeader) : NaN;
      if (Number.isNaN(server)) return;
      this._clockOffset = server + 500 - (sentAt + receivedAt) / 2;
    }

    _serverNow() { return Date.now() + this._clockOffset; }

    // The customer's last click of the choice: an address is given out only now.
    _confirm(asset, network) {
      if (this._confirming || this._final) return;
      const focused = this._el.methods.contains(this.shadowRoot.activeElement);
      this._confirming = true;
      this._setChoicesDisabled(true);
      this._setNotice('', '');
      this._setStatus('', TEXT.preparing);
      const body = JSON.stringify({ assetId: asset.id, networkId: network.id });
      this._call(this._request('POST', this._path('confirm'), body), (r) => {
        this._confirming = false;
        this._choosing = false;
        this._apply(r);
        if (!this._final) this._el.sendTitle.focus();
        this._schedulePoll(true);
      }, (err) => {
        this._confirming = false;
        this._setChoicesDisabled(false);
        this._setStatus('', '');
        this._showError(err);
        if (err.code === 'payment_method_unavailable') {
          this._assets = [];
          this._choosing = false;
        }
        // No rate counts now for that asset (503 rate_unavailable): the list read again leaves it
        // out, so the customer can pick another.
        if (err.code === 'rate_unavailable') this._reloadAssets(focused);
        this._pollNow(); // e.g. 409 invalid_state: the process changed meanwhile; read it now
      });
    }

    // The list again, then the choice again from it (focus on its first button when it was in the
    // choice); with nothing left to choose, the current payment's instructions or the note.
    _reloadAssets(focus) {
      this._call(this._fetchAssets(), (assets) => {
        this._assets = assets;
        if (this._final || !this._choosing || this._confirming) return;
        if (assets.length) {
          this._showChoices(null, focus);
        } else {
          this._choosing = false;
          this._renderPayable(this._process);
        }
      }, () => {}); // not read: the list stays as it was, the error is already shown
    }

    _simulate(outcome) {
      if (this._busy || this._final) return;
      this._setBusy(true);
      this._call(this._request('POST', this._path('sandbox/pay'), JSON.stringify({ outcome })), (r) => {
        this._setBusy(false);
        this._apply(r);
        if (this._final) return;
        this._el.dialog.close();
        if (outcome === 'failure' && r.process.status === 'pending') {
          this._setNotice('failure', TEXT.sandboxFailed);
          this._emit('payment-failure', this.process);
        }
        this._schedulePoll(true);
      }, (err) => {
        this._setBusy(false);
        this._el.dialog.close();
        this._showError(err);
        this._pollNow(); // e.g. 409 invalid_state: the process changed meanwhile
      });
    }

    // Polling: while payment instructions are shown, every second; after a live payment expired or
    // was cancelled, every 2 s for POLL.LATE_WATCH_MS. Otherwise, and after a failed poll, 1 s
    // doubling to 15 s. Paused while the page is hidden, stopped when final.
    _schedulePoll(reset) {
      this._stopPolling();
      if (reset) this._pollDelay = POLL.FIRST_MS;
      const late = this._final && this._lateUntil > Date.now();
      if ((this._final && !late) || this._pollInFlight || !this._process || document.hidden) return;
      const live = !this._final && this._process.payment && !this._pollFailed;
      const delay = late && !this._pollFailed ? POLL.LATE_MS : live ? POLL.LIVE_MS : this._pollDelay;
      if (delay === this._pollDelay) this._pollDelay = Math.min(delay * 2, POLL.MAX_MS);
      this._pollTimer = setTimeout(() => this._poll(), delay);
    }

    _poll() {
      this._pollTimer = null;
      this._pollInFlight = true;
      this._call(this._fetchPublic(), (r) => {
        this._pollInFlight = false;
        if (this._pollFailed) { this._pollFailed = false; this._pollDelay = POLL.FIRST_MS; }
        this._apply(r);
        this._schedulePoll(false);
      }, (err) => {
        this._pollInFlight = false;
        // The key or the process is gone: say so and stop. Anything else is transient: back off.
        if ([401, 403, 404].includes(err.status)) { this._loadFailed(err, false); return; }
        if (!this._pollFailed) this._pollDelay = POLL.FIRST_MS;
        this._pollFailed = true;
        this._schedulePoll(false);
      });
    }

    _pollNow() {
      this._stopPolling();
      this._pollDelay = POLL.FIRST_MS;
      if (!this._pollInFlight) this._poll();
    }

    _visibilityChanged() {
      if (document.hidden) {
        this._stopPolling();
      } else if (this._process && (!this._final || this._lateUntil > Date.now()) && !this._pollTimer && !this._pollInFlight) {
        this._pollDelay = POLL.FIRST_MS;
        this._poll();
      }
    }

    _stopPolling() {
      clearTimeout(this._pollTimer);
      this._pollTimer = null;
    }

    _stopTimers() {
      this._stopPolling();
      clearInterval(this._countdownTimer);
      this._countdownTimer = null;
    }

    // ==== 5. Rendering, per state ============================================================

    // -- loading, and a load that failed --

    _resetView() {
      const el = this._el;
      el.loading.hidden = false;
      hide(el.amount, el.quote, el.countdown, el.pay, el.note, el.outcome, el.retry, el.badge, el.methods, el.instructions,
        el.walletTx);
      this._setNotice('', '');
      this._setStatus('', '');
      this._setBusy(false);
      el.label.textContent = TEXT.payment;
    }

    _loadFailed(err, retryable) {
      const el = this._el;
      this._stopTimers();
      if (el.dialog.open) el.dialog.close();
      hide(el.loading, el.amount, el.quote, el.countdown, el.pay, el.note, el.methods, el.instructions);
      el.label.textContent = TEXT.payment;
      this._setStatus('', '');
      el.retry.hidden = !retryable;
      this._showError(err);
    }

    // -- an answer from the service: a final state, or the payable one --

    _apply({ process, amount }) {
      if (this._final) { this._applyLate(process); return; } // a late answer never undoes a final state
      this._process = process;
      this._amountText = amount;
      this._el.loading.hidden = true;
      this._el.badge.hidden = process.livemode !== false;
      if (FINAL[process.status]) {
        this._renderAmount();
        this._finish(process.status);
        return;
      }
      this._renderPayable(process);
      this._startCountdown(process);
      if (process.status === 'pending' && process.payment) this._paymentEvents(process);
    }

    // Live: the choice or the instructions. Test mode keeps the sandbox; with a live method next to
    // it, it is the secondary action.
    _renderPayable(process) {
      const el = this._el;
      const pending = process.status === 'pending';
      const payment = pending ? process.payment : null;
      const sandbox = process.livemode === false;
      const live = Boolean(payment) || (!this._expiring && this._assets.length > 0);
      if (payment && transfersOf(payment).length) this._choosing = false; // a transfer fixes the choice
      if (payment && !this._choosing) this._showInstructions(payment);
      else if (live && pending && !this._choosing && !this._confirming) this._showChoices(null, false);
      if (!live) hide(el.methods, el.instructions);
      el.pay.hidden = !sandbox;
      el.pay.disabled = !pending || this._expiring;
      el.pay.classList.toggle('secondary', live);
      this._renderAmount();
      el.note.hidden = sandbox || live || this._expiring;
      el.note.textContent = TEXT.noMethod;
    }

    _renderAmount() {
      const el = this._el;
      if (!this._amountText) return;
      const { value, code } = this._price();
      el.amountValue.textContent = value;
      el.currency.textContent = code;
      el.currency.hidden = !code;
      el.amount.hidden = false;
      el.label.textContent = TEXT.amountLabel(this._process && this._process.status);
      const shown = this._shownAmount();
      el.pay.textContent = el.pay.classList.contains('secondary') ? TEXT.sandbox : TEXT.pay(shown);
      el.dlgAmount.textContent = shown;
    }

    // The process's currency as the service says it; the currency attribute only for a service that
    // sends none.
    _currency() {
      const sent = this._process && this._process.currency;
      if (typeof sent === 'string' && /^[A-Z]{3}$/.test(sent)) return sent;
      return (this.getAttribute('currency') || '').trim();
    }

    // The languages to format the price in: the nearest lang attribute (the page's), the browser's.
    _languages() {
      const tagged = this.closest('[lang]');
      return [tagged && tagged.getAttribute('lang'), navigator.language]
        .filter((l) => typeof l === 'string' && l.trim());
    }

    // The price formatted ({value}), or, when Intl cannot format its currency, the amount with the
    // currency as written after it ({value, code}).
    _price() {
      const currency = this._currency();
      const formatted = currency ? formatPrice(this._amountText, currency, this._languages()) : null;
      return formatted ? { value: formatted, code: '' } : { value: this._amountText, code: currency };
    }

    _shownAmount() {
      const { value, code } = this._price();
      return code ? `${value} ${code}` : value;
    }

    // -- the countdown, and what happens when it runs out --

    _startCountdown(process) {
      const el = this._el;
      this._expiresAt = Date.parse(process.expiresAt);
      el.countdown.hidden = Number.isNaN(this._expiresAt);
      if (!this._countdownTimer && !el.countdown.hidden && !this._expiring) {
        this._countdownTimer = setInterval(() => this._tick(), 1000);
      }
      this._tick();
    }

    _tick() {
      if (this._final || Number.isNaN(this._expiresAt)) return;
      const left = Math.ceil((this._expiresAt - this._serverNow()) / 1000);
      const el = this._el;
      if (left > 0 && !this._expiring) {
        el.countdown.textContent = TEXT.expiresIn(clockText(left));
        el.countdown.classList.toggle('urgent', left <= 60);
      } else if (this._process && this._process.payment) {
        this._expireLive();
      } else {
        this._expireUnpaid();
      }
    }

    // A live payment: a transfer made in time still counts while it confirms, so the service
    // decides (polled every second). No more instructions to send: nothing could count now.
    _expireLive() {
      const el = this._el;
      el.countdown.textContent = TEXT.expired;
      el.countdown.classList.add('urgent');
      hide(el.send, el.change);
      el.pay.disabled = true;
      this._expiring = true;
      this._renderPaymentStatus(this._process);
    }

    // Past expiresAt the process can never complete, even before the service marks it expired:
    // read it once more (it may have completed just in time), then show it expired.
    _expireUnpaid() {
      const el = this._el;
      clearInterval(this._countdownTimer);
      this._countdownTimer = null;
      el.pay.disabled = true;
      el.countdown.textContent = TEXT.expired;
      el.methods.hidden = true;
      if (this._expiring) return;
      this._expiring = true;
      this._call(this._fetchPublic(), (r) => {
        if (this._final) return;
        if (FINAL[r.process.status] || r.process.payment) { this._apply(r); return; }
        this._process = r.process;
        this._finish('expired');
      }, () => { if (!this._final) this._finish('expired'); });
    }

    // -- choosing the asset, then the network --

    // Step by step: the asset (skipped when there is one), then its network (skipped when there is
    // one). The last click confirms: an address is given out only on that click.
    _showChoices(asset, focus) {
      const el = this._el;
      const assets = this._assets;
      this._choosing = true;
      const chosen = asset || (assets.length === 1 ? assets[0] : null);
      this._asset = chosen;
      const pickNetwork = Boolean(chosen && chosen.networks.length > 1);
      if (pickNetwork) {
        el.stepTitle.textContent = TEXT.payWithOn(chosen.symbol);
        el.choices.replaceChildren(...chosen.networks.map((n) => choiceButton(n.name, '', dueText(chosen, [n]),
          () => this._confirm(chosen, n))));
      } else {
        el.stepTitle.textContent = TEXT.payWith;
        // An asset on several networks: its amount when they all agree (else on the network step).
        el.choices.replaceChildren(...assets.map((a) => (a.networks.length === 1
          ? choiceButton(TEXT.assetOn(a.symbol, a.networks[0].name), a.name, dueText(a, a.networks),
            () => this._confirm(a, a.networks[0]))
          : choiceButton(a.symbol, a.name, dueText(a, a.networks), () => this._showChoices(a, true)))));
      }
      const hasPayment = Boolean(this._process && this._process.payment);
      el.back.hidden = !(pickNetwork && assets.length > 1) && !hasPayment;
      el.back.textContent = hasPayment && !pickNetwork ? TEXT.keepChoice : TEXT.back;
      el.methods.hidden = false;
      el.instructions.hidden = true;
      this._renderQuote(null); // the quote is the current choice's: shown with its instructions
      this._setStatus('', '');
      if (focus) el.choices.firstElementChild.focus();
    }

    _setChoicesDisabled(disabled) {
      for (const b of this._el.choices.querySelectorAll('button')) b.disabled = disabled;
    }

    // Back from the networks to the assets; or, with a payment, back to its instructions.
    _back() {
      const p = this._process;
      if (this._asset && this._asset.networks.length > 1 && this._assets.length > 1) {
        this._showChoices(null, true);
      } else if (p && p.payment) {
        this._choosing = false;
        this._showInstructions(p.payment);
        this._el.sendTitle.focus();
      }
    }

    // -- the instructions: what to send where, and the payment's state --

    _names(payment) {
      const asset = this._assets.find((a) => a.id === payment.assetId);
      const network = asset && asset.networks.find((n) => n.id === payment.networkId);
      return {
        symbol: (asset && asset.symbol) || payment.assetId,
        network: (network && network.name) || payment.networkId,
        // N of "k of N": the network's depth from GET /payment-button/assets (null: "k so far").
        confirmations: network && Number.isInteger(network.confirmations) ? network.confirmations : null,
      };
    }

    _showInstructions(payment) {
      const el = this._el;
      const names = this._names(payment);
      const { received, remaining } = paymentSums(payment);
      const partly = decCmp(received, '0') > 0;
      this._sendText = partly ? remaining : payment.amountDue;
      el.sendTitle.textContent = partly ? TEXT.sendRemaining : TEXT.sendExactly;
      el.sendAmount.textContent = `${this._sendText} ${names.symbol}`;
      el.network.textContent = TEXT.network(names.network, payment.chainId);
      el.address.textContent = payment.address;
      this._renderQr(payment, `${this._sendText} ${names.symbol}`);
      el.warning.textContent = TEXT.onlyThis(names.symbol, names.network);
      // Once what was sent covers the amount, nothing more is asked for: only the confirmations.
      el.send.hidden = this._expiring || decCmp(remaining, '0') <= 0;
      this._renderWallets();
      el.change.hidden = this._expiring || transfersOf(payment).length > 0;
      el.methods.hidden = true;
      el.instructions.hidden = false;
      this._renderQuote(payment);
      this._renderPaymentStatus(this._process);
    }

    // Under the price, for a payment quoted at a rate: what the quote was (nothing at par).
    _renderQuote(payment) {
      const line = payment ? quoteText(payment, this._names(payment).symbol) : '';
      this._el.quote.textContent = line;
      this._el.quote.hidden = !line;
    }

    // The QR code and the wallet link of the service's EIP-681 URI, which asks for what is still
    // outstanding (docs/contract.md, docs/payments.md). The code is asked for again only when the
    // URI changes.
    _renderQr(payment, amount) {
      const el = this._el;
      const uri = typeof payment.paymentUri === 'string' && payment.paymentUri.startsWith('ethereum:')
        ? payment.paymentUri : '';
      if (uri !== el.qr.dataset.uri) {
        el.qr.textContent = '';
        el.qr.dataset.uri = uri;
        el.qr.setAttribute('aria-label', TEXT.qrLabel(amount, payment.address));
        if (uri) this._loadQr(uri);
      }
      el.qr.hidden = !uri;
      el.wallet.hidden = !uri;
      if (uri) el.wallet.href = uri;
    }

    // The service's SVG of the payment's current URI (GET …/qr.svg), shown if the URI is still the
    // one shown. On a failure the box stays empty and the next poll asks again.
    async _loadQr(uri) {
      const qr = this._el.qr;
      let svg = null;
      try {
        const res = await fetch(this._base + this._path('qr.svg'), {
          headers: { 'x-public-key': this._key }, mode: 'cors', credentials: 'omit', cache: 'no-store',
          signal: this._abort.signal,
        });
        if (res.ok && (res.headers.get('Content-Type') || '').startsWith('image/svg+xml')) svg = await res.text();
      } catch (err) { /* unreachable or aborted: asked again below */ }
      if (qr.dataset.uri !== uri) return;
      if (svg) qr.innerHTML = svg;
      else delete qr.dataset.uri;
    }

    // -- paying from a browser wallet (EIP-6963 / EIP-1193) --

    // The payment's network in the listing: its eip712Domain and `gasless` flag (ERC-3009 assets).
    _networkEntry(payment) {
      const asset = this._assets.find((a) => a.id === payment.assetId);
      return (asset && asset.networks.find((n) => n.id === payment.networkId)) || null;
    }

    // "Pay with NAME" per wallet, and "Pay without gas" beside it when the service offers it.
    _renderWallets() {
      const el = this._el;
      const process = this._process;
      const payment = process && process.payment;
      const wallets = payment && process.status === 'pending' && !this._expiring ? browserWallets() : [];
      const entry = payment ? this._networkEntry(payment) : null;
      const gasless = Boolean(entry && entry.gasless === true && entry.eip712Domain);
      el.wallets.hidden = wallets.length === 0;
      const key = `${wallets.map((w) => w.name).join('\n')}|${gasless}`;
      if (key === this._walletKey) return; // redrawn only when it changes: focus stays put
      this._walletKey = key;
      el.walletList.replaceChildren(...wallets.map((w) => this._walletRow(w, gasless)));
      this._setWalletsDisabled(this._walletBusy);
    }

    _walletRow(wallet, gasless) {
      const row = document.createElement('div');
      row.className = 'wallet-row';
      const pay = document.createElement('button');
      pay.type = 'button';
      pay.className = 'pay-wallet';
      const icon = walletIcon(wallet.icon);
      if (icon) pay.append(icon);
      pay.append(TEXT.payWithWallet(wallet.name));
      pay.addEventListener('click', () => this._payFromWallet(wallet, false));
      row.append(pay);
      if (gasless) {
        const free = document.createElement('button');
        free.type = 'button';
        free.className = 'gasless';
        free.textContent = TEXT.payGasless;
        free.setAttribute('aria-label', TEXT.payGaslessWith(wallet.name));
        free.addEventListener('click', () => this._payFromWallet(wallet, true));
        row.append(free);
      }
      return row;
    }

    _setWalletsDisabled(disabled) {
      for (const b of this._el.walletList.querySelectorAll('button')) b.disabled = disabled;
    }

    async _payFromWallet(wallet, gasless) {
      if (this._walletBusy || this._final) return;
      const gen = this._gen;
      this._walletBusy = true;
      this._setWalletsDisabled(true);
      this._setNotice('', '');
      try {
        const hash = await this._walletPayment(wallet, gasless, gen);
        if (gen !== this._gen || !hash) return;
        this._el.walletTx.textContent = TEXT.walletSent(hash);
        this._el.walletTx.hidden = false;
        this._pollNow();
      } catch (err) {
        if (gen !== this._gen || (err && err.name === 'AbortError')) return;
        this._setNotice('error', walletMessage(err));
        if (err instanceof ApiError) {
          this._emitError(err);
          if (err.code === 'payment_method_unavailable') this._noGasless();
          this._pollNow();
        }
      } finally {
        if (gen === this._gen) {
          this._walletBusy = false;
          this._setWalletsDisabled(false);
          this._renderPaymentStatus(this._process);
        }
      }
    }

    // Connect, switch to the payment's network, read what is still due and the chain id again, then
    // one transfer (or one signed authorization): nothing is sent unless the chain id matches.
    async _walletPayment(wallet, gasless, gen) {
      const provider = wallet.provider;
      const chosen = this._process.payment;
      const { network } = this._names(chosen);
      const target = `0x${chosen.chainId.toString(16)}`;
      this._setStatus('', TEXT.walletOpen(wallet.name));
      const accounts = await provider.request({ method: 'eth_requestAccounts' });
      const from = Array.isArray(accounts) && typeof accounts[0] === 'string' ? accounts[0] : '';
      if (!/^0x[0-9a-fA-F]{40}$/.test(from)) throw new WalletError(TEXT.walletNoAccount);
      if (!sameChain(await provider.request({ method: 'eth_chainId' }), target)) {
        this._setStatus('', TEXT.walletSwitch(network, chosen.chainId));
        try {
          await provider.request({ method: 'wallet_switchEthereumChain', params: [{ chainId: target }] });
        } catch (err) {
          if (err && err.code === 4902) throw new WalletError(TEXT.walletUnknownChain(network, chosen.chainId));
          throw err;
        }
      }
      const r = await this._fetchPublic(); // a transfer may have arrived meanwhile
      if (gen !== this._gen) return '';
      this._apply(r);
      const payment = r.process.payment;
      if (this._final || !payment || r.process.status !== 'pending') return '';
      const units = outstandingUnits(payment);
      if (units <= 0n) throw new WalletError(TEXT.walletNothingLeft);
      if (payment.chainId !== chosen.chainId || !sameChain(await provider.request({ method: 'eth_chainId' }), target)) {
        throw new WalletError(TEXT.walletWrongChain(network, chosen.chainId));
      }
      this._setStatus('', TEXT.walletOpen(wallet.name));
      if (gasless) return this._signAuthorization(provider, from, payment, units);
      const hash = await provider.request({
        method: 'eth_sendTransaction',
        params: [{ from, to: payment.tokenContract, data: transferData(payment.address, units) }],
      });
      return String(hash);
    }

    // Without gas (ERC-3009): the payer signs TransferWithAuthorization of exactly what is due, valid
    // until 5 minutes after the payment expires; the service's relayer sends it.
    async _signAuthorization(provider, from, payment, units) {
      const entry = this._networkEntry(payment);
      const validBefore = Math.floor(Date.parse(this._process.expiresAt) / 1000) + 300;
      const message = { from, to: payment.address, value: units.toString(), validAfter: 0, validBefore, nonce: randomNonce() };
      const typed = {
        types: { EIP712Domain: EIP712_DOMAIN, TransferWithAuthorization: AUTHORIZATION },
        primaryType: 'TransferWithAuthorization', domain: entry.eip712Domain, message,
      };
      const signature = await provider.request({ method: 'eth_signTypedData_v4', params: [from, JSON.stringify(typed)] });
      const { data } = await this._request('POST', this._path('authorization'), JSON.stringify({ ...message, signature }), 'txHash');
      return String(data.txHash);
    }

    // The service no longer offers the gasless way (no relayer, out of gas, its hourly cap).
    _noGasless() {
      const payment = this._process && this._process.payment;
      const entry = payment && this._networkEntry(payment);
      if (entry) entry.gasless = false;
      this._renderWallets();
    }

    // The status line (role=status): waiting, seen and confirming (k of N), partly paid.
    _renderPaymentStatus(process) {
      const payment = process && process.payment;
      if (!payment || this._final || this._walletBusy) return;
      const { symbol, confirmations, network } = this._names(payment);
      const { received, remaining } = paymentSums(payment);
      const due = payment.amountDue;
      // The network's node is down or stalled: said beside whatever else is said.
      const delayed = process.networkState === 'unavailable' ? ` ${TEXT.delayed(network)}` : '';
      if (decCmp(payment.amountPending, '0') > 0) {
        const open = unconfirmed(transfersOf(payment), confirmations);
        const k = open.length ? Math.min(...open.map((t) => t.confirmations)) : 0;
        const byTag = payment.finality === 'safe' || payment.finality === 'finalized';
        let text = byTag ? TEXT.seenFinal : TEXT.seen(k, confirmations);
        if (decCmp(remaining, '0') > 0) text += ` ${TEXT.sendRest(received, due, remaining, symbol)}`;
        this._setStatus('seen', text + delayed);
      } else if (decCmp(payment.amountPaid, '0') > 0) {
        this._setStatus('partial', TEXT.sendRest(payment.amountPaid, due, remaining, symbol) + delayed);
      } else if (this._expiring) {
        this._setStatus('', TEXT.checkingInTime + delayed);
      } else {
        this._setStatus('', TEXT.waiting(`${due} ${symbol}`) + delayed);
      }
    }

    async _copy(button, text, what) {
      if (!text) return;
      let ok = false;
      try {
        await navigator.clipboard.writeText(text);
        ok = true;
      } catch (_) {
        ok = this._copyBySelection(text);
        button.focus();
      }
      const label = button.firstChild;
      label.textContent = ok ? TEXT.copied : TEXT.copyFailed;
      this._el.copied.textContent = ok ? TEXT.copiedSaid(what) : TEXT.copyFailedSaid(what);
      clearTimeout(button._reset);
      button._reset = setTimeout(() => { label.textContent = TEXT.copy; this._el.copied.textContent = ''; }, COPIED_MS);
    }

    // No clipboard API (an insecure context): copy through a selected, off-screen text area.
    _copyBySelection(text) {
      const area = document.createElement('textarea');
      area.value = text;
      area.setAttribute('readonly', '');
      area.style.cssText = 'position:fixed;top:-1000px;opacity:0';
      this.shadowRoot.append(area);
      area.select();
      let ok = false;
      try { ok = document.execCommand('copy'); } catch (_) { ok = false; }
      area.remove();
      return ok;
    }

    // -- a final state: completed, expired, cancelled --

    _finish(status) {
      const el = this._el;
      this._final = status;
      this._stopTimers();
      // The customer was acting in the dialog or on the button: move focus to the result, since
      // the controls it was on disappear (or were disabled while the payment was recorded).
      const hadFocus = el.dialog.open || this.shadowRoot.activeElement !== null;
      if (el.dialog.open) el.dialog.close();
      hide(el.quote, el.countdown, el.pay, el.note, el.retry, el.methods, el.instructions, el.walletTx);
      this._setNotice('', '');
      this._setStatus('', '');
      el.outcome.className = `outcome ${status}`;
      el.label.textContent = TEXT.amountLabel(status);
      el.outcomeIcon.innerHTML = FINAL[status].icon;
      this._renderOutcome();
      el.outcome.hidden = false;
      if (hadFocus) el.outcome.focus();
      this._emit(FINAL[status].event, this.process);
      // A transfer to an expired or cancelled payment's address may still arrive: keep showing it.
      if (this._process && this._process.payment && status !== 'completed') {
        this._lateUntil = Date.now() + POLL.LATE_WATCH_MS;
        this._schedulePoll(true);
      }
    }

    _applyLate(process) {
      if (!this._lateUntil || process.status !== this._final || !process.payment) return;
      this._process = process;
      this._renderOutcome();
    }

    // The outcome's title and text; with a live payment, what it received says more.
    _renderOutcome() {
      const status = this._final;
      const payment = this._process && this._process.payment;
      let title = FINAL[status].title;
      let text = FINAL[status].text(this._shownAmount());
      if (payment) {
        const symbol = this._names(payment).symbol;
        const { received } = paymentSums(payment);
        const due = payment.amountDue;
        const over = decAdd(payment.amountPaid, due, -1);
        if (status === 'completed') {
          // Paid on-chain: what was paid. (A sandbox payment completes it with nothing paid on-chain:
          // the process amount stays.)
          if (decCmp(payment.amountPaid, '0') > 0) text = FINAL.completed.text(`${payment.amountPaid} ${symbol}`);
          if (over && decCmp(over, '0') > 0) text += TEXT.overpaid(over, symbol);
        } else if (decCmp(received, '0') > 0) {
          const full = decCmp(received, due) >= 0;
          if (status === 'expired' && full) title = TEXT.paidLate;
          text = full ? TEXT.arrivedLate(`${received} ${symbol}`, status) : TEXT.arrivedShort(received, due, symbol);
        }
      }
      this._el.outcomeTitle.textContent = title;
      this._el.outcomeText.textContent = text;
    }

    // -- the sandbox dialog (test mode) --

    _openDialog() {
      const p = this._process;
      if (!p || p.status !== 'pending' || p.livemode !== false || this._final) return;
      this._setNotice('', '');
      this._el.dialog.showModal();
      this._el.success.focus();
    }

    _dialogClosed() {
      const el = this._el;
      if (!this._final && !el.pay.hidden && !el.pay.disabled) el.pay.focus();
    }

    _setBusy(busy) {
      this._busy = busy;
      const el = this._el;
      el.busy.hidden = !busy;
      if (busy) el.dialog.setAttribute('aria-busy', 'true'); else el.dialog.removeAttribute('aria-busy');
      for (const b of [el.success, el.failure, el.close]) b.disabled = busy;
    }

    // -- the two message lines: the notice (errors) and the status (announced when it changes) --

    _setNotice(kind, text) {
      const n = this._el.notice;
      n.className = kind ? `notice ${kind}` : 'notice';
      n.textContent = text;
      n.hidden = !text;
    }

    _setStatus(kind, text) {
      const s = this._el.payStatus;
      s.className = kind ? `pay-status ${kind}` : 'pay-status';
      if (s.textContent !== text) s.textContent = text; // unchanged text is not announced again
    }

    _showError(err) {
      this._setNotice('error', err.message);
      this._emitError(err);
    }

    // ==== 6. Events ==========================================================================

    // payment-pending once per transfer seen unconfirmed; payment-partial once per confirmed sum
    // below the amount due. The final states' events: _finish; payment-failure: _simulate.
    _paymentEvents(process) {
      const payment = process.payment;
      const transfers = transfersOf(payment);
      const key = (t) => `${t.txHash}:${t.logIndex}`;
      const fresh = decCmp(payment.amountPending, '0') > 0
        ? unconfirmed(transfers, this._names(payment).confirmations).filter((t) => !this._seenTransfers.has(key(t)))
        : [];
      for (const t of transfers) this._seenTransfers.add(key(t));
      if (fresh.length) this._emit('payment-pending', this.process);
      const paid = payment.amountPaid;
      if (decCmp(paid, '0') > 0 && decCmp(paid, payment.amountDue) < 0 && !this._partialSums.has(paid)) {
        this._partialSums.add(paid);
        this._emit('payment-partial', this.process);
      }
    }

    _emit(type, detail) {
      this.dispatchEvent(new CustomEvent(type, { bubbles: true, composed: true, detail }));
    }

    _emitError(err) {
      this._emit('payment-error', { code: err.code, message: err.message, status: err.status });
    }
  }

  customElements.define(TAG, PaymentButton);
})();
