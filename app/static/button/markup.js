// The shadow DOM's markup (its fixed labels included), where its style sheet is, and the few DOM
// helpers the element draws with. The card stays hidden until the style sheet has loaded (or
// failed to: then it shows unstyled), so the customer never sees it half-drawn.

// button.css beside this file: a file of its own, which a page's CSP allows with style-src.
export const STYLESHEET = new URL('./button.css', import.meta.url).href;

export const TEMPLATE = `
<section class="card" part="card" aria-label="Payment" hidden>
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

export function hide(...elements) { for (const e of elements) e.hidden = true; }

// A choice: its text, and on its side the asset's name (sub) over what it costs (due), each if any.
export function choiceButton(text, sub, due, onClick) {
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

/** Copies `text` without the clipboard API (an insecure context), through a selected, off-screen
 * text area in `root`; whether the browser says it copied. */
export function copyBySelection(text, root) {
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.style.cssText = 'position:fixed;top:-1000px;opacity:0';
  root.append(area);
  area.select();
  let ok = false;
  try { ok = document.execCommand('copy'); } catch (_) { ok = false; }
  area.remove();
  return ok;
}
