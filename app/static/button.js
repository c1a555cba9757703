/*
 * <payment-button process-id="…" public-key="pk_test_…" [api-base="https://pay.example"] [currency="EUR"]>
 *
 * The payment button web component of the preorder service. No dependencies, no build step (ES2020),
 * no external resources (fonts, images, styles): everything lives in this file and its shadow DOM,
 * the QR code included (drawn by qr.js's qrSvg: showing a payment address sends nothing to a third
 * party). The service serves qr.js and this file as one script (app/routes/button.py).
 *
 * Attributes (all observed; changing process-id, public-key or api-base re-initialises the button):
 *   process-id  the processId the merchant backend got from POST /payment-button/process/preorder
 *   public-key  the merchant's public key (pk_test_… / pk_live_…), sent as the x-public-key header
 *   api-base    base URL of the service; default: where this script was loaded from (the origin of
 *               its src, keeping a path prefix when the src ends in /payment-button/button.js)
 *   currency    display only (the API defines no currency): shown after the amount, e.g. "EUR"
 *
 * Paying: the stablecoins the service lists (GET /payment-button/assets): the customer picks the
 * asset, then the network (a step with one choice is skipped), and the button confirms the choice
 * (POST …/confirm), then shows the exact amount and the address (each with a copy button), the
 * network, a QR code of the EIP-681 payment URI and a link opening it in a wallet app, and follows
 * the payment as the service sees it (polled every second while shown). Test-mode merchants also
 * get the sandbox ("Simulate a payment").
 *
 * Events (CustomEvent, bubbles, composed, fired on the element):
 *   payment-success    detail: the public process {processId, status, amount, expiresAt, livemode,
 *                      payment}
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
 * --payment-button-font on the element; shadow parts card, amount, pay-button, test-badge, outcome,
 * methods, instructions, qr.
 *
 * customElements.get('payment-button').qrSvg(text) returns the SVG markup of a QR code of `text`.
 */
(() => {
  'use strict';

  const TAG = 'payment-button';
  if (!window.customElements || customElements.get(TAG)) return;

  // document.currentScript is only set while this file first runs: capture it now.
  const SCRIPT_SRC = (document.currentScript && document.currentScript.src) || '';
  const SERVED_PATH = '/payment-button/button.js';
  const POLL_FIRST_MS = 1000;
  const POLL_MAX_MS = 15000;
  // While payment instructions are shown the button follows the service within 2 s: one GET a second.
  const POLL_LIVE_MS = 1000;
  // After a live payment expired (or was cancelled) a late transfer is still shown: polled every
  // 2 s for 10 minutes (a wallet that sent at the last moment is seen within that).
  const POLL_LATE_MS = 2000;
  const LATE_WATCH_MS = 10 * 60 * 1000;
  const COPIED_MS = 2000;

  const FINAL = {
    completed: {
      event: 'payment-success', icon: 'check', title: 'Payment received',
      text: (amount) => `Thank you. ${amount} has been paid.`,
    },
    expired: {
      event: 'payment-expired', icon: 'clock', title: 'Payment expired',
      text: () => 'This payment request has expired. Please start a new order.',
    },
    cancelled: {
      event: 'payment-cancelled', icon: 'cross', title: 'Payment cancelled',
      text: () => 'This payment request was cancelled by the merchant.',
    },
  };

  function defaultBase() {
    if (!SCRIPT_SRC) return window.location.origin;
    const url = new URL(SCRIPT_SRC, window.location.href);
    if (url.pathname.endsWith(SERVED_PATH)) {
      return url.origin + url.pathname.slice(0, -SERVED_PATH.length);
    }
    return url.origin;
  }

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

  function decScaled(d, scale) { return d.units * 10n ** BigInt(scale - d.scale); }

  /** a + sign * b, exact; null when either is not a decimal string. */
  function decAdd(a, b, sign = 1) {
    const x = dec(a);
    const y = dec(b);
    if (!x || !y) return null;
    const scale = Math.max(x.scale, y.scale);
    return decText(decScaled(x, scale) + BigInt(sign) * decScaled(y, scale), scale);
  }

  function decText(units, scale) {
    const neg = units < 0n;
    const digits = (neg ? -units : units).toString().padStart(scale + 1, '0');
    const int = digits.slice(0, digits.length - scale);
    const frac = digits.slice(digits.length - scale).replace(/0+$/, '');
    return (neg ? '-' : '') + int + (frac ? '.' + frac : '');
  }

  function decCmp(a, b) {
    const d = decAdd(a, b, -1);
    if (d === null) return NaN;
    return d.startsWith('-') ? -1 : d === '0' ? 0 : 1;
  }

  function clockText(seconds) {
    const h = Math.floor(seconds / 3600);
    const m = Math.floor((seconds % 3600) / 60);
    const s = seconds % 60;
    const pad = (n) => String(n).padStart(2, '0');
    return h ? `${h}:${pad(m)}:${pad(s)}` : `${m}:${pad(s)}`;
  }

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  const ICONS = {
    check: '<path d="M6 12.5l4 4 8-9"/>',
    clock: '<circle cx="12" cy="12" r="8"/><path d="M12 8v4.5l3 2"/>',
    cross: '<path d="M8 8l8 8M16 8l-8 8"/>',
  };

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
  <p class="countdown" role="timer" hidden></p>
  <div class="live" role="status" aria-live="polite"><p class="pay-status"></p><p class="notice" hidden></p><span class="copied sr-only"></span><div class="outcome" part="outcome" tabindex="-1" hidden><span class="outcome-icon" aria-hidden="true"><svg viewBox="0 0 24 24"></svg></span><div><p class="outcome-title"></p><p class="outcome-text"></p></div></div></div>
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

  class PaymentButton extends HTMLElement {
    static get observedAttributes() { return ['process-id', 'public-key', 'api-base', 'currency']; }

    static qrSvg(text) { return qrSvg(String(text)); }

    constructor() {
      super();
      const root = this.attachShadow({ mode: 'open' });
      root.innerHTML = TEMPLATE;
      const $ = (sel) => root.querySelector(sel);
      this._el = {
        label: $('.label'), badge: $('.badge'), loading: $('.loading'), amount: $('.amount'), amountValue: $('.amount-value'),
        currency: $('.currency'), countdown: $('.countdown'), pay: $('.pay'), note: $('.note'),
        notice: $('.notice'), outcome: $('.outcome'), outcomeIcon: $('.outcome-icon svg'),
        outcomeTitle: $('.outcome-title'), outcomeText: $('.outcome-text'), retry: $('.retry'),
        dialog: $('dialog'), dlgAmount: $('.dlg-amount'), success: $('.sim-success'),
        failure: $('.sim-failure'), close: $('.close'), busy: $('.busy'),
        methods: $('.methods'), stepTitle: $('.step-title'), choices: $('.choices'), back: $('.back'),
        instructions: $('.instructions'), send: $('.send'), sendTitle: $('.send-title'), sendAmount: $('.send-amount'),
        copyAmount: $('.copy-amount'), network: $('.network'), address: $('.address'), copyAddress: $('.copy-address'),
        qr: $('.qr'), wallet: $('.wallet'), warning: $('.warning'), change: $('.change'),
        payStatus: $('.pay-status'), copied: $('.copied'),
      };
      this._gen = 0;
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
      el.copyAddress.addEventListener('click', () => this._copy(el.copyAddress, this._addressText, 'Address'));
      // Esc closes the native <dialog> (its "cancel" event), except while a payment is being recorded.
      el.dialog.addEventListener('cancel', (e) => { if (this._busy) e.preventDefault(); });
      el.dialog.addEventListener('close', () => this._dialogClosed());
    }

    /** The last public process read from the service (null before the first answer). */
    get process() { return this._process ? clone(this._process) : null; }

    connectedCallback() {
      document.addEventListener('visibilitychange', this._onVisibility);
      this._scheduleInit();
    }

    disconnectedCallback() {
      document.removeEventListener('visibilitychange', this._onVisibility);
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
      clearTimeout(this._pollTimer);
      clearInterval(this._countdownTimer);
      this._pollTimer = null;
      this._countdownTimer = null;
      this._pollInFlight = false;
      this._busy = false;
      if (this._el.dialog.open) this._el.dialog.close();
    }

    _init() {
      this._teardown();
      this._abort = new AbortController();
      this._process = null;
      this._amountText = '';
      this._final = null;
      this._expiring = false;
      this._assets = [];
      this._choosing = false;
      this._confirming = false;
      this._asset = null;
      this._lateUntil = 0;
      this._pollFailed = false;
      this._seenTransfers = new Set();
      this._partialSums = new Set();
      this._shownUri = '';
      const el = this._el;
      el.loading.hidden = false;
      for (const e of [el.amount, el.countdown, el.pay, el.note, el.outcome, el.retry, el.badge, el.methods,
        el.instructions]) e.hidden = true;
      this._setNotice('', '');
      this._setStatus('', '');
      this._setBusy(false);
      this._el.label.textContent = 'Payment';

      this._id = (this.getAttribute('process-id') || '').trim();
      this._key = (this.getAttribute('public-key') || '').trim();
      this._base = ((this.getAttribute('api-base') || '').trim() || defaultBase()).replace(/\/+$/, '');
      if (!this._id || !this._key) {
        this._loadFailed(new ApiError(0, 'invalid_configuration',
          'This payment button needs its process-id and public-key attributes.'), false);
        return;
      }
      const gen = this._gen;
      // Then what the customer may pay with, when it matters: for a pending process, or to name
      // what a payment was made in. Without it (an older service, a failure) the button still
      // works: the sandbox in test mode, ids for names.
      this._fetchPublic().then(async (r) => {
        let list = [];
        if (r.process.status === 'pending' || r.process.payment) {
          list = await this._fetchAssets().catch((err) => (err.name === 'AbortError' ? Promise.reject(err) : []));
        }
        return [r, list];
      }).then(([r, list]) => {
        if (gen !== this._gen) return;
        this._assets = list;
        el.loading.hidden = true;
        this._apply(r);
        this._schedulePoll(true);
      }, (err) => {
        if (gen !== this._gen || err.name === 'AbortError') return;
        this._loadFailed(err, err.status === 0 || err.status === 429 || err.status >= 500);
      });
    }

    _loadFailed(err, retryable) {
      const el = this._el;
      el.loading.hidden = true;
      el.label.textContent = 'Payment';
      clearTimeout(this._pollTimer);
      clearInterval(this._countdownTimer);
      this._pollTimer = null;
      this._countdownTimer = null;
      if (el.dialog.open) el.dialog.close();
      for (const e of [el.amount, el.countdown, el.pay, el.note, el.methods, el.instructions]) e.hidden = true;
      this._setStatus('', '');
      el.retry.hidden = !retryable;
      this._setNotice('error', err.message);
      this._emitError(err);
    }

    // ---- talking to the service -------------------------------------------------------------

    _path(suffix) { return `/payment-button/process/${encodeURIComponent(this._id)}/${suffix}`; }

    _fetchPublic() { return this._request('GET', this._path('public')); }

    async _fetchAssets() {
      const { data } = await this._request('GET', '/payment-button/assets', undefined, 'data');
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
        throw new ApiError(0, 'network_error', 'The payment service could not be reached. Check your connection and try again.');
      }
      this._noteServerTime(res.headers.get('Date'), sentAt, Date.now());
      let data = null;
      try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
      if (!res.ok) {
        const code = data && typeof data.code === 'string' ? data.code : `http_${res.status}`;
        const message = data && typeof data.message === 'string' && data.message
          ? data.message : `The payment service answered with status ${res.status}.`;
        throw new ApiError(res.status, code, message);
      }
      if (!data || typeof data !== 'object' || !(expect in data)) {
        throw new ApiError(res.status, 'invalid_response', 'The payment service sent an unexpected answer.');
      }
      if (expect === 'data') return { data };
      return { process: data, amount: amountText(text, data.amount) };
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

    // ---- state ------------------------------------------------------------------------------

    _apply({ process, amount }) {
      if (this._final) { this._applyLate(process); return; } // a late answer never undoes a final state
      this._process = process;
      this._amountText = amount;
      const el = this._el;
      el.loading.hidden = true;
      el.badge.hidden = process.livemode !== false;
      this._renderAmount();
      if (FINAL[process.status]) { this._finish(process.status); return; }

      const pending = process.status === 'pending';
      const payment = pending ? process.payment : null;
      const sandbox = process.livemode === false;
      const live = Boolean(payment) || (!this._expiring && this._assets.length > 0);
      // Once a transfer is recorded the choice is fixed: back to the instructions.
      if (payment && Array.isArray(payment.transfers) && payment.transfers.length) this._choosing = false;
      if (payment && !this._choosing) this._showInstructions(payment);
      else if (live && pending && !this._choosing && !this._confirming) this._showChoices(null, false);
      if (!live) { el.methods.hidden = true; el.instructions.hidden = true; }
      // Test mode keeps the sandbox; with a live method next to it, it is the secondary action.
      el.pay.hidden = !sandbox;
      el.pay.disabled = !pending || this._expiring;
      el.pay.classList.toggle('secondary', Boolean(live));
      this._renderAmount();
      el.note.hidden = sandbox || live || this._expiring;
      el.note.textContent = 'No payment method is available for this payment yet. Please contact the merchant.';
      this._expiresAt = Date.parse(process.expiresAt);
      el.countdown.hidden = Number.isNaN(this._expiresAt);
      if (!this._countdownTimer && !el.countdown.hidden && !this._expiring) {
        this._countdownTimer = setInterval(() => this._tick(), 1000);
      }
      this._tick();
      if (payment) this._paymentEvents(process);
    }

    _renderAmount() {
      const el = this._el;
      if (!this._amountText) return;
      const currency = (this.getAttribute('currency') || '').trim();
      el.amountValue.textContent = this._amountText;
      el.currency.textContent = currency;
      el.currency.hidden = !currency;
      el.amount.hidden = false;
      const status = this._process && this._process.status;
      el.label.textContent = status === 'completed' ? 'Amount paid' : FINAL[status] ? 'Amount' : 'Amount due';
      const shown = this._shownAmount();
      el.pay.textContent = el.pay.classList.contains('secondary') ? 'Simulate a payment (test mode)' : `Pay ${shown}`;
      el.dlgAmount.textContent = shown;
    }

    _shownAmount() {
      const currency = (this.getAttribute('currency') || '').trim();
      return currency ? `${this._amountText} ${currency}` : this._amountText;
    }

    _tick() {
      if (this._final || Number.isNaN(this._expiresAt)) return;
      const left = Math.ceil((this._expiresAt - this._serverNow()) / 1000);
      const el = this._el;
      const payment = this._process && this._process.payment;
      if (left > 0 && !this._expiring) {
        el.countdown.textContent = `Expires in ${clockText(left)}`;
        el.countdown.classList.toggle('urgent', left <= 60);
        return;
      }
      if (payment) {
        // A live payment: a transfer made in time still counts while it confirms, so the service
        // decides (polled every second). No more instructions to send: nothing could count now.
        el.countdown.textContent = 'Expired';
        el.countdown.classList.add('urgent');
        el.send.hidden = true;
        el.change.hidden = true;
        el.pay.disabled = true;
        this._expiring = true;
        this._renderPaymentStatus(this._process);
        return;
      }
      // Past expiresAt the process can never complete, even before the service marks it expired:
      // read it once more (it may have completed just in time), then show it expired.
      clearInterval(this._countdownTimer);
      this._countdownTimer = null;
      el.pay.disabled = true;
      el.countdown.textContent = 'Expired';
      el.methods.hidden = true;
      if (this._expiring) return;
      this._expiring = true;
      const gen = this._gen;
      this._fetchPublic().then((r) => {
        if (gen !== this._gen || this._final) return;
        if (FINAL[r.process.status] || r.process.payment) { this._apply(r); return; }
        this._process = r.process;
        this._finish('expired');
      }, (err) => {
        if (gen !== this._gen || err.name === 'AbortError' || this._final) return;
        this._finish('expired');
      });
    }

    _finish(status) {
      const info = FINAL[status];
      const el = this._el;
      this._final = status;
      clearTimeout(this._pollTimer);
      clearInterval(this._countdownTimer);
      this._pollTimer = null;
      this._countdownTimer = null;
      // The customer was acting in the dialog or on the button: move focus to the result, since
      // the controls it was on disappear (or were disabled while the payment was recorded).
      const hadFocus = el.dialog.open || this.shadowRoot.activeElement !== null;
      if (el.dialog.open) el.dialog.close();
      for (const e of [el.countdown, el.pay, el.note, el.retry, el.methods, el.instructions]) e.hidden = true;
      this._setNotice('', '');
      this._setStatus('', '');
      el.outcome.className = `outcome ${status}`;
      el.label.textContent = status === 'completed' ? 'Amount paid' : 'Amount';
      el.outcomeIcon.innerHTML = ICONS[info.icon];
      this._renderOutcome();
      el.outcome.hidden = false;
      if (hadFocus) el.outcome.focus();
      const payment = this._process && this._process.payment;
      this._emit(info.event, this.process);
      // A transfer to an expired or cancelled payment's address may still arrive: keep showing it.
      if (payment && status !== 'completed') {
        this._lateUntil = Date.now() + LATE_WATCH_MS;
        this._schedulePoll(true);
      }
    }

    _applyLate(process) {
      if (!this._lateUntil || process.status !== this._final || !process.payment) return;
      this._process = process;
      this._renderOutcome();
    }

    _renderOutcome() {
      const el = this._el;
      const status = this._final;
      const info = FINAL[status];
      const p = this._process || {};
      const payment = p.payment;
      let title = info.title;
      let text = info.text(this._shownAmount());
      if (payment) {
        const sym = this._names(payment).symbol;
        const received = decAdd(payment.amountPaid, payment.amountPending) || '0';
        const over = decAdd(payment.amountPaid, payment.amountDue, -1);
        if (status === 'completed') {
          text = `Thank you. ${payment.amountPaid} ${sym} has been paid.`;
          if (over && decCmp(over, '0') > 0) text += ` That is ${over} ${sym} more than due: the merchant will contact you about it.`;
        } else if (decCmp(received, '0') > 0) {
          const full = decCmp(received, payment.amountDue) >= 0;
          title = status === 'expired' && full ? 'Paid after expiry' : info.title;
          text = full
            ? `${received} ${sym} arrived after this payment request ${status === 'expired' ? 'expired' : 'was cancelled'}: the merchant will contact you.`
            : `${received} of ${payment.amountDue} ${sym} arrived, but the payment was not completed: the merchant will contact you.`;
        }
      }
      el.outcomeTitle.textContent = title;
      el.outcomeText.textContent = text;
    }

    // ---- live payment: choosing, confirming, instructions ------------------------------------

    _names(payment) {
      const asset = this._assets.find((a) => a.id === payment.assetId);
      const network = asset && asset.networks.find((n) => n.id === payment.networkId);
      return {
        symbol: (asset && asset.symbol) || payment.assetId,
        network: (network && network.name) || payment.networkId,
        confirmations: Number.isInteger(payment.confirmationsRequired) ? payment.confirmationsRequired
          : network && Number.isInteger(network.confirmations) ? network.confirmations : null,
      };
    }

    // The choice, step by step: the asset (skipped when there is one), then its network (skipped
    // when there is one). The last click confirms: an address is given out only on that click.
    _showChoices(asset, focus) {
      const el = this._el;
      const assets = this._assets;
      this._choosing = true;
      this._asset = asset || (assets.length === 1 ? assets[0] : null);
      const step = this._asset && this._asset.networks.length > 1 ? 'network' : 'asset';
      el.choices.replaceChildren();
      const add = (text, sub, onClick) => {
        const b = document.createElement('button');
        b.type = 'button';
        b.className = 'choice';
        const main = document.createElement('span');
        main.textContent = text;
        b.append(main);
        if (sub) {
          const s = document.createElement('span');
          s.className = 'sub';
          s.textContent = sub;
          b.append(s);
        }
        b.addEventListener('click', onClick);
        el.choices.append(b);
      };
      if (step === 'network') {
        el.stepTitle.textContent = `Pay with ${this._asset.symbol} on`;
        for (const n of this._asset.networks) add(n.name, '', () => this._confirm(this._asset, n));
      } else {
        el.stepTitle.textContent = 'Pay with';
        for (const a of assets) {
          if (a.networks.length === 1) add(`${a.symbol} on ${a.networks[0].name}`, a.name, () => this._confirm(a, a.networks[0]));
          else add(a.symbol, a.name, () => this._showChoices(a, true));
        }
      }
      const hasPayment = Boolean(this._process && this._process.payment);
      el.back.hidden = !(step === 'network' && assets.length > 1) && !hasPayment;
      el.back.textContent = hasPayment && step === 'asset' ? 'Keep the current choice' : 'Back';
      el.methods.hidden = false;
      el.instructions.hidden = true;
      this._setStatus('', '');
      if (focus) el.choices.firstElementChild.focus();
    }

    _back() {
      const p = this._process;
      if (this._asset && this._asset.networks.length > 1 && this._assets.length > 1) {
        this._showChoices(null, true);
        this._asset = null;
        return;
      }
      if (p && p.payment) {
        this._choosing = false;
        this._showInstructions(p.payment);
        this._el.sendTitle.focus();
      }
    }

    async _confirm(asset, network) {
      if (this._confirming || this._final) return;
      const el = this._el;
      const gen = this._gen;
      this._confirming = true;
      for (const b of el.choices.querySelectorAll('button')) b.disabled = true;
      this._setNotice('', '');
      this._setStatus('', 'Preparing your payment…');
      try {
        const r = await this._request('POST', this._path('confirm'),
          JSON.stringify({ assetId: asset.id, networkId: network.id }));
        if (gen !== this._gen) return;
        this._confirming = false;
        this._choosing = false;
        this._apply(r);
        if (!this._final) el.sendTitle.focus();
        this._schedulePoll(true);
      } catch (err) {
        if (gen !== this._gen || err.name === 'AbortError') return;
        this._confirming = false;
        for (const b of el.choices.querySelectorAll('button')) b.disabled = false;
        this._setStatus('', '');
        this._setNotice('error', err.message);
        this._emitError(err);
        if (err.code === 'payment_method_unavailable') {
          this._assets = [];
          this._choosing = false;
        }
        // e.g. 409 invalid_state: the process changed meanwhile; read it now rather than later.
        this._pollNow();
      }
    }

    _showInstructions(payment) {
      const el = this._el;
      const names = this._names(payment);
      const received = decAdd(payment.amountPaid, payment.amountPending) || '0';
      const remaining = decAdd(payment.amountDue, received, -1) || payment.amountDue;
      const partly = decCmp(received, '0') > 0;
      this._sendText = partly ? remaining : payment.amountDue;
      this._addressText = payment.address;
      el.sendTitle.textContent = partly ? 'Send the remaining' : 'Send exactly';
      el.sendAmount.textContent = `${this._sendText} ${names.symbol}`;
      el.network.textContent = Number.isInteger(payment.chainId) ? `${names.network} (chain ${payment.chainId})` : names.network;
      el.address.textContent = payment.address;
      // The service's EIP-681 URI asks for what is still outstanding (API.md, docs/payments.md).
      const uri = typeof payment.paymentUri === 'string' && payment.paymentUri.startsWith('ethereum:')
        ? payment.paymentUri : '';
      if (uri !== this._shownUri) {
        this._shownUri = uri;
        el.qr.innerHTML = uri ? qrSvg(uri) : '';
        el.qr.dataset.uri = uri;
        el.qr.setAttribute('aria-label', `QR code for a wallet app: ${this._sendText} ${names.symbol} to ${payment.address}`);
      }
      el.qr.hidden = !uri;
      el.wallet.hidden = !uri;
      if (uri) el.wallet.href = uri;
      el.warning.textContent = `Send only ${names.symbol} on ${names.network}: other tokens or networks are not credited to this payment.`;
      // Once what was sent covers the amount, nothing more is asked for: only the confirmations.
      el.send.hidden = this._expiring || decCmp(remaining, '0') <= 0;
      el.change.hidden = this._expiring || (Array.isArray(payment.transfers) && payment.transfers.length > 0);
      el.methods.hidden = true;
      el.instructions.hidden = false;
      this._renderPaymentStatus(this._process);
    }

    _renderPaymentStatus(process) {
      const payment = process && process.payment;
      if (!payment || this._final) return;
      const names = this._names(payment);
      const sym = names.symbol;
      const received = decAdd(payment.amountPaid, payment.amountPending) || '0';
      const remaining = decAdd(payment.amountDue, received, -1) || payment.amountDue;
      const more = decCmp(remaining, '0') > 0;
      const transfers = Array.isArray(payment.transfers) ? payment.transfers : [];
      if (decCmp(payment.amountPending, '0') > 0) {
        const open = transfers.filter((t) => names.confirmations === null || t.confirmations < names.confirmations);
        const k = open.length ? Math.min(...open.map((t) => t.confirmations)) : 0;
        const of = names.confirmations === null ? `${k} so far` : `${k} of ${names.confirmations}`;
        let text = `Payment seen, waiting for confirmations (${of}).`;
        if (more) text += ` Received ${received} of ${payment.amountDue} ${sym}: send the remaining ${remaining} ${sym}.`;
        this._setStatus('seen', text);
      } else if (decCmp(payment.amountPaid, '0') > 0) {
        this._setStatus('partial', `Received ${payment.amountPaid} of ${payment.amountDue} ${sym}: send the remaining ${remaining} ${sym}.`);
      } else if (this._expiring) {
        this._setStatus('', 'Checking for a payment made in time…');
      } else {
        this._setStatus('', `Waiting for your payment of ${payment.amountDue} ${sym}…`);
      }
    }

    // payment-pending once per transfer seen unconfirmed; payment-partial once per confirmed sum
    // below the amount due.
    _paymentEvents(process) {
      const payment = process.payment;
      const names = this._names(payment);
      const transfers = Array.isArray(payment.transfers) ? payment.transfers : [];
      if (decCmp(payment.amountPending, '0') > 0) {
        const fresh = transfers.filter((t) => (names.confirmations === null || t.confirmations < names.confirmations)
          && !this._seenTransfers.has(`${t.txHash}:${t.logIndex}`));
        for (const t of fresh) this._seenTransfers.add(`${t.txHash}:${t.logIndex}`);
        if (fresh.length) this._emit('payment-pending', this.process);
      }
      for (const t of transfers) this._seenTransfers.add(`${t.txHash}:${t.logIndex}`);
      if (process.status === 'pending' && decCmp(payment.amountPaid, '0') > 0
          && decCmp(payment.amountPaid, payment.amountDue) < 0 && !this._partialSums.has(payment.amountPaid)) {
        this._partialSums.add(payment.amountPaid);
        this._emit('payment-partial', this.process);
      }
    }

    async _copy(button, text, what) {
      if (!text) return;
      let ok = false;
      try {
        await navigator.clipboard.writeText(text);
        ok = true;
      } catch (_) {
        // No clipboard API (an insecure context): copy through a selected, off-screen text area.
        const area = document.createElement('textarea');
        area.value = text;
        area.setAttribute('readonly', '');
        area.style.cssText = 'position:fixed;top:-1000px;opacity:0';
        this.shadowRoot.append(area);
        area.select();
        try { ok = document.execCommand('copy'); } catch (__) { ok = false; }
        area.remove();
        button.focus();
      }
      const label = button.firstChild;
      label.textContent = ok ? 'Copied' : 'Copy failed';
      this._el.copied.textContent = ok ? `${what} copied` : `${what} could not be copied: select it and copy it by hand`;
      clearTimeout(button._reset);
      button._reset = setTimeout(() => { label.textContent = 'Copy'; this._el.copied.textContent = ''; }, COPIED_MS);
    }

    // ---- polling ----------------------------------------------------------------------------
    // While payment instructions are shown: every second; after a live payment expired or was
    // cancelled: every 2 s for LATE_WATCH_MS. Otherwise, and after a failed poll, 1 s doubling to
    // 15 s. Paused while the page is hidden, stopped when final.

    _schedulePoll(reset) {
      clearTimeout(this._pollTimer);
      this._pollTimer = null;
      if (reset) this._pollDelay = POLL_FIRST_MS;
      const late = this._final && this._lateUntil > Date.now();
      if ((this._final && !late) || this._pollInFlight || !this._process || document.hidden) return;
      const live = !this._final && this._process.payment && !this._pollFailed;
      const delay = late && !this._pollFailed ? POLL_LATE_MS : live ? POLL_LIVE_MS : this._pollDelay;
      if (delay === this._pollDelay) this._pollDelay = Math.min(delay * 2, POLL_MAX_MS);
      this._pollTimer = setTimeout(() => this._poll(), delay);
    }

    _poll() {
      this._pollTimer = null;
      this._pollInFlight = true;
      const gen = this._gen;
      this._fetchPublic().then((r) => {
        if (gen !== this._gen) return;
        this._pollInFlight = false;
        if (this._pollFailed) { this._pollFailed = false; this._pollDelay = POLL_FIRST_MS; }
        this._apply(r);
        this._schedulePoll(false);
      }, (err) => {
        if (gen !== this._gen || err.name === 'AbortError') return;
        this._pollInFlight = false;
        // The key or the process is gone: say so and stop. Anything else is transient: back off.
        if ([401, 403, 404].includes(err.status)) { this._loadFailed(err, false); return; }
        if (!this._pollFailed) this._pollDelay = POLL_FIRST_MS;
        this._pollFailed = true;
        this._schedulePoll(false);
      });
    }

    _pollNow() {
      clearTimeout(this._pollTimer);
      this._pollTimer = null;
      this._pollDelay = POLL_FIRST_MS;
      if (!this._pollInFlight) this._poll();
    }

    _visibilityChanged() {
      if (document.hidden) {
        clearTimeout(this._pollTimer);
        this._pollTimer = null;
      } else if (this._process && (!this._final || this._lateUntil > Date.now()) && !this._pollTimer && !this._pollInFlight) {
        this._pollDelay = POLL_FIRST_MS;
        this._poll();
      }
    }

    // ---- the sandbox dialog -----------------------------------------------------------------

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

    async _simulate(outcome) {
      if (this._busy || this._final) return;
      const gen = this._gen;
      this._setBusy(true);
      try {
        const r = await this._request('POST', this._path('sandbox/pay'), JSON.stringify({ outcome }));
        if (gen !== this._gen) return;
        this._setBusy(false);
        this._apply(r);
        if (this._final) return;
        this._el.dialog.close();
        if (outcome === 'failure' && r.process.status === 'pending') {
          this._setNotice('failure', 'Payment failed. No money was taken. You can try again.');
          this._emit('payment-failure', this.process);
        }
        this._schedulePoll(true);
      } catch (err) {
        if (gen !== this._gen || err.name === 'AbortError') return;
        this._setBusy(false);
        this._el.dialog.close();
        this._setNotice('error', err.message);
        this._emitError(err);
        this._pollNow(); // e.g. 409 invalid_state: the process changed meanwhile
      }
    }

    // ---- output -----------------------------------------------------------------------------

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

    _emit(type, detail) {
      this.dispatchEvent(new CustomEvent(type, { bubbles: true, composed: true, detail }));
    }

    _emitError(err) {
      this._emit('payment-error', { code: err.code, message: err.message, status: err.status });
    }
  }

  function clone(value) {
    return typeof structuredClone === 'function' ? structuredClone(value) : JSON.parse(JSON.stringify(value));
  }

  customElements.define(TAG, PaymentButton);
})();
