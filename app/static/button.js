/*
 * <payment-button process-id="…" public-key="pk_test_…" [api-base="https://pay.example"] [currency="EUR"]>
 *
 * The payment button web component of the preorder service. No dependencies, no build step (ES2020),
 * no external resources (fonts, images, styles): everything lives in this file and its shadow DOM.
 *
 * Attributes (all observed; changing process-id, public-key or api-base re-initialises the button):
 *   process-id  the processId the merchant backend got from POST /payment-button/process/preorder
 *   public-key  the merchant's public key (pk_test_… / pk_live_…), sent as the x-public-key header
 *   api-base    base URL of the service; default: where this script was loaded from (the origin of
 *               its src, keeping a path prefix when the src ends in /payment-button/button.js)
 *   currency    display only (the API defines no currency): shown after the amount, e.g. "EUR"
 *
 * Events (CustomEvent, bubbles, composed, fired on the element):
 *   payment-success    detail: the public process {processId, status, amount, expiresAt, livemode}
 *   payment-failure    detail: the public process (still "pending": the customer may try again)
 *   payment-expired    detail: the public process as last read (its status may still say "pending"
 *                      when the countdown ran out before the service swept it; it can never complete)
 *   payment-cancelled  detail: the public process (the merchant cancelled it)
 *   payment-error      detail: {code, message, status} (status 0: the service could not be reached)
 * A final-state event fires once per process-id shown, also when the process is already final when
 * the button loads (so a merchant page reloaded after payment still learns the outcome).
 *
 * Styling hooks: CSS custom properties --payment-button-accent, --payment-button-radius,
 * --payment-button-font on the element; shadow parts card, amount, pay-button, test-badge, outcome.
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
@media (max-width: 360px) { .card { padding: 16px; } .amount { font-size: 28px; } }
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
  <button type="button" class="pay" part="pay-button" hidden>Pay</button>
  <p class="note" hidden>Live payments are not available in this build.</p>
  <div class="live" role="status" aria-live="polite"><p class="notice" hidden></p><div class="outcome" part="outcome" tabindex="-1" hidden><span class="outcome-icon" aria-hidden="true"><svg viewBox="0 0 24 24"></svg></span><div><p class="outcome-title"></p><p class="outcome-text"></p></div></div></div>
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
      // Esc closes the native <dialog> (its "cancel" event), except while a payment is being recorded.
      el.dialog.addEventListener('cancel', (e) => { if (this._busy) e.preventDefault(); });
      el.dialog.addEventListener('close', () => this._dialogClosed());
    }

    /** The last public process read from the service (null before the first answer). */
    get process() { return this._process ? { ...this._process } : null; }

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
      const el = this._el;
      el.loading.hidden = false;
      for (const e of [el.amount, el.countdown, el.pay, el.note, el.outcome, el.retry, el.badge]) e.hidden = true;
      this._setNotice('', '');
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
      this._fetchPublic().then((r) => {
        if (gen !== this._gen) return;
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
      for (const e of [el.amount, el.countdown, el.pay, el.note]) e.hidden = true;
      el.retry.hidden = !retryable;
      this._setNotice('error', err.message);
      this._emitError(err);
    }

    // ---- talking to the service -------------------------------------------------------------

    _path(suffix) { return `/payment-button/process/${encodeURIComponent(this._id)}/${suffix}`; }

    _fetchPublic() { return this._request('GET', this._path('public')); }

    async _request(method, path, body) {
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
      if (!data || typeof data !== 'object' || typeof data.status !== 'string') {
        throw new ApiError(res.status, 'invalid_response', 'The payment service sent an unexpected answer.');
      }
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
      if (this._final) return; // final states are final: a late answer never undoes one
      this._process = process;
      this._amountText = amount;
      const el = this._el;
      el.loading.hidden = true;
      el.badge.hidden = process.livemode !== false;
      this._renderAmount();
      if (FINAL[process.status]) { this._finish(process.status); return; }

      const pending = process.status === 'pending';
      el.pay.hidden = false;
      // Live mode: this build has no real payment method yet (only sandbox payments exist), so the
      // button is shown but disabled with a note, instead of pretending to take a real payment.
      el.pay.disabled = !pending || process.livemode !== false || this._expiring;
      el.note.hidden = process.livemode === false;
      this._expiresAt = Date.parse(process.expiresAt);
      el.countdown.hidden = Number.isNaN(this._expiresAt);
      if (!this._countdownTimer && !el.countdown.hidden && !this._expiring) {
        this._countdownTimer = setInterval(() => this._tick(), 1000);
      }
      this._tick();
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
      el.pay.textContent = `Pay ${shown}`;
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
      if (left > 0 && !this._expiring) {
        el.countdown.textContent = `Expires in ${clockText(left)}`;
        el.countdown.classList.toggle('urgent', left <= 60);
        return;
      }
      // Past expiresAt the process can never complete, even before the service marks it expired:
      // read it once more (it may have completed just in time), then show it expired.
      clearInterval(this._countdownTimer);
      this._countdownTimer = null;
      el.pay.disabled = true;
      el.countdown.textContent = 'Expired';
      if (this._expiring) return;
      this._expiring = true;
      const gen = this._gen;
      this._fetchPublic().then((r) => {
        if (gen !== this._gen || this._final) return;
        if (FINAL[r.process.status]) { this._apply(r); return; }
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
      for (const e of [el.countdown, el.pay, el.note, el.retry]) e.hidden = true;
      this._setNotice('', '');
      el.outcome.className = `outcome ${status}`;
      el.label.textContent = status === 'completed' ? 'Amount paid' : 'Amount';
      el.outcomeIcon.innerHTML = ICONS[info.icon];
      el.outcomeTitle.textContent = info.title;
      el.outcomeText.textContent = info.text(this._shownAmount());
      el.outcome.hidden = false;
      if (hadFocus) el.outcome.focus();
      this._emit(info.event, this.process);
    }

    // ---- polling: 1 s doubling to 15 s, paused while the page is hidden, stopped when final ----

    _schedulePoll(reset) {
      clearTimeout(this._pollTimer);
      this._pollTimer = null;
      if (reset) this._pollDelay = POLL_FIRST_MS;
      if (this._final || this._pollInFlight || !this._process || document.hidden) return;
      const delay = this._pollDelay;
      this._pollDelay = Math.min(delay * 2, POLL_MAX_MS);
      this._pollTimer = setTimeout(() => this._poll(), delay);
    }

    _poll() {
      this._pollTimer = null;
      this._pollInFlight = true;
      const gen = this._gen;
      this._fetchPublic().then((r) => {
        if (gen !== this._gen) return;
        this._pollInFlight = false;
        this._apply(r);
        this._schedulePoll(false);
      }, (err) => {
        if (gen !== this._gen || err.name === 'AbortError') return;
        this._pollInFlight = false;
        // The key or the process is gone: say so and stop. Anything else is transient: back off.
        if ([401, 403, 404].includes(err.status)) { this._loadFailed(err, false); return; }
        this._schedulePoll(false);
      });
    }

    _visibilityChanged() {
      if (document.hidden) {
        clearTimeout(this._pollTimer);
        this._pollTimer = null;
      } else if (this._process && !this._final && !this._pollTimer && !this._pollInFlight) {
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
        // e.g. 409 invalid_state: the process changed meanwhile; read it now rather than later.
        clearTimeout(this._pollTimer);
        this._pollTimer = null;
        this._pollDelay = POLL_FIRST_MS;
        if (!this._pollInFlight) this._poll();
      }
    }

    // ---- output -----------------------------------------------------------------------------

    _setNotice(kind, text) {
      const n = this._el.notice;
      n.className = kind ? `notice ${kind}` : 'notice';
      n.textContent = text;
      n.hidden = !text;
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
