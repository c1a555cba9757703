// The Button API as the element calls it: one request with the merchant's public key (CORS, no
// credentials, never cached), its answer or its error envelope as an ApiError, the QR code's SVG,
// and the service's base URL when the element has no api-base.
import { amountText } from './format.js';
import { TEXT } from './texts.js';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** A service answer as {process, amount} (expect 'status') or {data} (expect 'data'); else throws. */
export function answerOf(res, text, expect) {
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

// The service's base URL when api-base is not set: where these modules were loaded from (the origin,
// keeping a path prefix when they are served under <prefix>/payment-button/button/); a merchant's own
// copy of the files gives its own origin.
export function defaultBase() {
  const served = '/payment-button/button/api.js';
  const url = new URL(import.meta.url);
  if (url.pathname.endsWith(served)) return url.origin + url.pathname.slice(0, -served.length);
  return url.origin;
}

/** A call of the Button API: `conn` is {base, key, signal, onServerTime(dateHeader, sentAt,
 * receivedAt)}; `expect` the field an answer must have ('status' for a process, 'data' for a list).
 * A failed fetch is ApiError status 0 (unreachable); an abort stays an AbortError. */
export async function request(conn, method, path, body, expect = 'status') {
  const headers = { 'x-public-key': conn.key, Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const sentAt = Date.now();
  let res;
  let text;
  try {
    res = await fetch(conn.base + path, {
      method, headers, body, mode: 'cors', credentials: 'omit', cache: 'no-store', signal: conn.signal,
    });
    text = await res.text();
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError(0, 'network_error', TEXT.unreachable);
  }
  conn.onServerTime(res.headers.get('Date'), sentAt, Date.now());
  return answerOf(res, text, expect);
}

/** The service's SVG of a payment's QR code (GET …/qr.svg), or null when it could not be read. */
export async function fetchQrSvg(conn, path) {
  try {
    const res = await fetch(conn.base + path, {
      headers: { 'x-public-key': conn.key }, mode: 'cors', credentials: 'omit', cache: 'no-store', signal: conn.signal,
    });
    if (res.ok && (res.headers.get('Content-Type') || '').startsWith('image/svg+xml')) return await res.text();
  } catch (err) { /* unreachable or aborted: the caller asks again later */ }
  return null;
}
