// Amounts and their formatting: exact decimal arithmetic on the service's decimal strings (BigInt,
// never a float), the price in the merchant's currency (Intl.NumberFormat), the lines under it, the
// countdown's clock.
import { TEXT } from './texts.js';

// The amount exactly as the service wrote it: its JSON token from the raw body (never through
// float arithmetic); String(number) only if the token cannot be found.
export function amountText(raw, parsed) {
  const m = /"amount"\s*:\s*(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/.exec(raw);
  if (m && Number(m[1]) === parsed) return plainDecimal(m[1]);
  return plainDecimal(String(parsed));
}

// "1.5e-3" -> "0.0015", by moving the decimal point in the digit string.
export function plainDecimal(token) {
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
export function dec(text) {
  const m = /^(\d+)(?:\.(\d+))?$/.exec(typeof text === 'string' ? text : '');
  if (!m) return null;
  return { units: BigInt(m[1] + (m[2] || '')), scale: (m[2] || '').length };
}

/** a + sign * b as a decimal string, exact; null when either is not a decimal string. */
export function decAdd(a, b, sign = 1) {
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

export function decCmp(a, b) { // -1, 0 or 1; NaN when either is not a decimal string
  const d = decAdd(a, b, -1);
  if (d === null) return NaN;
  return d.startsWith('-') ? -1 : d === '0' ? 0 : 1;
}

/** What a payment has received so far (confirmed or not) and what is still to send (0 once
 * the amount is covered: more than due is an overpayment, never a negative amount to send). */
export function paymentSums(payment) {
  const received = decAdd(payment.amountPaid, payment.amountPending) || '0';
  const rest = decAdd(payment.amountDue, received, -1);
  return { received, remaining: rest === null ? payment.amountDue : rest.startsWith('-') ? '0' : rest };
}

export function transfersOf(payment) { return Array.isArray(payment.transfers) ? payment.transfers : []; }

// -- Prices in the merchant's currency --

/** The price as people of its currency read it ("€19.99", "19,99 €"), in the first of `languages`
 * Intl accepts (else the browser's own): Intl.NumberFormat formats the decimal string itself,
 * exactly, never through a float, with the currency's usual places and never fewer than the
 * amount has. null when Intl refuses the currency (not a three-letter code). */
export function formatPrice(amount, currency, languages) {
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
export function dueText(asset, networks) {
  const dues = new Set(networks.map((n) => n.amountDue));
  const [due] = dues;
  return dues.size === 1 && dec(due) ? TEXT.payAmount(due, asset.symbol) : '';
}

/** The line under the price for a payment quoted at a rate (the payment's `quote`): the price, what
 * to pay in the token, the pair's rate as it reads ("1 EUR = 1.0842 USD", whichever way the amount
 * due was worked out) and its time; '' at par or without a quote (an older service). */
export function quoteText(payment, symbol) {
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
export function utcTime(iso, reference) {
  const at = typeof iso === 'string' ? new Date(iso) : null;
  if (!at || Number.isNaN(at.getTime())) return '';
  const day = at.toISOString().slice(0, 10);
  const ref = typeof reference === 'string' ? new Date(reference) : null;
  const sameDay = ref && !Number.isNaN(ref.getTime()) && ref.toISOString().slice(0, 10) === day;
  return TEXT.rateTime(sameDay ? '' : day, at.toISOString().slice(11, 16));
}
// The transfers still confirming (all of them while the required depth is unknown).
export function unconfirmed(transfers, required) {
  return transfers.filter((t) => required === null || t.confirmations < required);
}

export function clockText(seconds) {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  const pad = (n) => String(n).padStart(2, '0');
  return h ? `${h}:${pad(m)}:${pad(s)}` : `${m}:${pad(s)}`;
}
