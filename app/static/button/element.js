/*
 * <payment-button process-id="…" public-key="pk_test_…" [api-base="https://pay.example"] [currency="EUR"]>
 *
 * The payment button web component of the preorder service: this module defines the element (its
 * life, its calls and polling, what it shows per state, its events). No dependencies, no build step
 * (native ES modules, ES2020): button.js, the one classic script a merchant's page includes, imports
 * this file, which imports its neighbours (texts.js, format.js, status.js, api.js, wallets.js,
 * markup.js); the style sheet is button.css beside them, linked into the shadow root. Nothing comes
 * from a third party: the QR code is drawn by the service (GET …/qr.svg, fetched like the API
 * calls: showing a payment address sends nothing to a third party).
 *
 * Attributes (all observed; changing process-id, public-key or api-base re-initialises the button):
 *   process-id  the processId the merchant backend got from POST /payment-button/process/preorder
 *   public-key  the merchant's public key (pk_test_… / pk_live_…), sent as the x-public-key header
 *   api-base    base URL of the service; default: where these modules were loaded from (the origin,
 *               keeping a path prefix when served under <prefix>/payment-button/button/)
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
 * Reading order: the poll schedule, then the element: 3. its life, 4. API calls and polling,
 * 5. rendering, per state, 6. events (1. the texts are texts.js, 2. amounts format.js).
 */
import { ApiError, defaultBase, fetchQrSvg, request } from './api.js';
import {
  clockText, decCmp, dueText, formatPrice, paymentSums, quoteText, transfersOf, unconfirmed,
} from './format.js';
import { STYLESHEET, TEMPLATE, choiceButton, copyBySelection, hide } from './markup.js';
import { outcomeText, paymentStatus } from './status.js';
import { FINAL, TEXT } from './texts.js';
import {
  WALLET_LISTENERS, browserWallets, signedAuthorization, walletMessage, walletPayment, walletRow,
} from './wallets.js';

const TAG = 'payment-button';

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

class PaymentButton extends HTMLElement {
  // ==== 3. The element's life: attributes, (re)initialisation ==============================

  static get observedAttributes() { return ['process-id', 'public-key', 'api-base', 'currency']; }

  constructor() {
    super();
    const root = this.attachShadow({ mode: 'open' });
    root.innerHTML = TEMPLATE;
    // The style sheet first; the card is shown once it has loaded (or failed to: shown unstyled).
    const sheet = document.createElement('link');
    sheet.rel = 'stylesheet';
    sheet.href = STYLESHEET;
    const reveal = () => { root.querySelector('.card').hidden = false; };
    sheet.addEventListener('load', reveal);
    sheet.addEventListener('error', reveal);
    root.prepend(sheet);
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
    this._onWallets = () => this._renderWallets();

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
    WALLET_LISTENERS.add(this._onWallets);
    this._scheduleInit();
  }

  disconnectedCallback() {
    document.removeEventListener('visibilitychange', this._onVisibility);
    WALLET_LISTENERS.delete(this._onWallets);
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
  _request(method, path, body, expect = 'status') {
    return request(this._conn(), method, path, body, expect);
  }

  // This initialisation's connection: its base, its key, its abort signal, the clock it corrects.
  _conn() {
    return {
      base: this._base, key: this._key, signal: this._abort.signal,
      onServerTime: (date, sentAt, receivedAt) => this._noteServerTime(date, sentAt, receivedAt),
    };
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
    const svg = await fetchQrSvg(this._conn(), this._path('qr.svg'));
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
    const pay = (wallet, withoutGas) => this._payFromWallet(wallet, withoutGas);
    el.walletList.replaceChildren(...wallets.map((w) => walletRow(w, gasless, pay)));
    this._setWalletsDisabled(this._walletBusy);
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

  // The wallet's payment of what is due (wallets.js): the status line says each step; the process
  // is read again before anything is asked for; without gas, the service submits the signature.
  _walletPayment(wallet, gasless, gen) {
    const chosen = this._process.payment;
    return walletPayment(wallet, chosen, this._names(chosen).network, {
      say: (text) => this._setStatus('', text),
      reread: async () => {
        const r = await this._fetchPublic(); // a transfer may have arrived meanwhile
        if (gen !== this._gen) return null;
        this._apply(r);
        return this._final || r.process.status !== 'pending' ? null : r.process.payment;
      },
      authorize: gasless ? (provider, from, payment, units) => this._authorize(provider, from, payment, units) : null,
    });
  }

  // Without gas (ERC-3009): the payer signs TransferWithAuthorization of exactly what is due, valid
  // until 5 minutes after the payment expires; the service's relayer sends it.
  async _authorize(provider, from, payment, units) {
    const validBefore = Math.floor(Date.parse(this._process.expiresAt) / 1000) + 300;
    const signed = await signedAuthorization(provider, from, payment.address, units, validBefore,
      this._networkEntry(payment).eip712Domain);
    const { data } = await this._request('POST', this._path('authorization'), JSON.stringify(signed), 'txHash');
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
    const { kind, text } = paymentStatus(process, this._names(payment), this._expiring);
    this._setStatus(kind, text);
  }

  async _copy(button, text, what) {
    if (!text) return;
    let ok = false;
    try {
      await navigator.clipboard.writeText(text);
      ok = true;
    } catch (_) {
      ok = copyBySelection(text, this.shadowRoot);
      button.focus();
    }
    const label = button.firstChild;
    label.textContent = ok ? TEXT.copied : TEXT.copyFailed;
    this._el.copied.textContent = ok ? TEXT.copiedSaid(what) : TEXT.copyFailedSaid(what);
    clearTimeout(button._reset);
    button._reset = setTimeout(() => { label.textContent = TEXT.copy; this._el.copied.textContent = ''; }, COPIED_MS);
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
    const payment = this._process && this._process.payment;
    const symbol = payment ? this._names(payment).symbol : '';
    const { title, text } = outcomeText(this._final, payment, this._shownAmount(), symbol);
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

// Defined once, whichever copy of the script loaded first (button.js also checks before importing).
if (!customElements.get(TAG)) customElements.define(TAG, PaymentButton);
