// Browser wallets: discovery (EIP-6963 announcements, else a bare EIP-1193 window.ethereum), the
// token transfer a wallet is asked to send, the ERC-3009 authorization it is asked to sign (EIP-712
// typed data, eth_signTypedData_v4), and what the payer reads when a wallet request fails.
import { ApiError } from './api.js';
import { TEXT } from './texts.js';

// ERC-3009's TransferWithAuthorization and its EIP-712 domain, as eth_signTypedData_v4 takes them.
const EIP712_DOMAIN = [{ name: 'name', type: 'string' }, { name: 'version', type: 'string' },
  { name: 'chainId', type: 'uint256' }, { name: 'verifyingContract', type: 'address' }];
const AUTHORIZATION = [{ name: 'from', type: 'address' }, { name: 'to', type: 'address' },
  { name: 'value', type: 'uint256' }, { name: 'validAfter', type: 'uint256' },
  { name: 'validBefore', type: 'uint256' }, { name: 'nonce', type: 'bytes32' }];

// -- Browser wallets: EIP-6963 discovery (each wallet announces itself), a bare EIP-1193
// window.ethereum when none does. A wallet announced twice keeps its first announcement.
const WALLETS = new Map(); // uuid -> {name, icon, provider}
// What redraws each button on the page when a wallet announces itself (the element adds its own).
export const WALLET_LISTENERS = new Set();
window.addEventListener('eip6963:announceProvider', (event) => {
  const detail = event.detail;
  const info = detail && detail.info;
  if (!info || typeof info.uuid !== 'string' || typeof info.name !== 'string' || !info.name.trim()
      || !detail.provider || typeof detail.provider.request !== 'function' || WALLETS.has(info.uuid)) return;
  WALLETS.set(info.uuid, { name: info.name.trim().slice(0, 60), icon: info.icon, provider: detail.provider });
  for (const redraw of WALLET_LISTENERS) redraw();
});
window.dispatchEvent(new Event('eip6963:requestProvider'));

export function browserWallets() {
  if (WALLETS.size) return [...WALLETS.values()];
  const injected = window.ethereum;
  return injected && typeof injected.request === 'function' ? [{ name: TEXT.browserWallet, icon: '', provider: injected }] : [];
}

// A wallet's icon, as an <img> only when it is a data:image/ URI (never markup, never a remote URL).
export function walletIcon(icon) {
  if (typeof icon !== 'string' || !/^data:image\/[a-z0-9.+-]+[;,]/i.test(icon)) return null;
  const img = document.createElement('img');
  img.src = icon;
  img.alt = '';
  return img;
}

// The call data of the token's transfer(to, units): selector a9059cbb, then two ABI words.
export function transferData(to, units) {
  return `0xa9059cbb${to.slice(2).toLowerCase().padStart(64, '0')}${units.toString(16).padStart(64, '0')}`;
}

// What is still due in base units: the service's EIP-681 URI asks for exactly that.
export function outstandingUnits(payment) {
  const m = /[?&]uint256=(\d+)(?:&|$)/.exec(typeof payment.paymentUri === 'string' ? payment.paymentUri : '');
  return m ? BigInt(m[1]) : 0n;
}

export function sameChain(reported, wanted) {
  try { return BigInt(reported) === BigInt(wanted); } catch (_) { return false; }
}

function randomNonce() {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return `0x${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

export class WalletError extends Error {}

// What the payer reads when a wallet request did not go through (EIP-1193's codes).
export function walletMessage(err) {
  if (err instanceof WalletError || err instanceof ApiError) return err.message;
  const code = err && err.code;
  if (code === 4001) return TEXT.walletRejected;
  if (code === -32002) return TEXT.walletBusy;
  const text = err && typeof err.message === 'string' && err.message ? err.message : String(err);
  return TEXT.walletFailed(text.endsWith('.') ? text : `${text}.`);
}

/** The ERC-3009 TransferWithAuthorization of exactly `units` from `from` to the payment's deposit
 * address, valid until `validBefore` (unix seconds), with a random nonce: the message the service
 * takes (POST …/authorization) and the typed data the wallet signs under the token's `domain`. */
export function authorization(from, to, units, validBefore, domain) {
  const message = { from, to, value: units.toString(), validAfter: 0, validBefore, nonce: randomNonce() };
  const typed = {
    types: { EIP712Domain: EIP712_DOMAIN, TransferWithAuthorization: AUTHORIZATION },
    primaryType: 'TransferWithAuthorization', domain, message,
  };
  return { message, typed };
}
