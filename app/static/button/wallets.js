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

/** A wallet's row: "Pay with NAME" (with its icon), and "Pay without gas" beside it when the service
 * offers it; `pay(wallet, gasless)` on a click. */
export function walletRow(wallet, gasless, pay) {
  const row = document.createElement('div');
  row.className = 'wallet-row';
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'pay-wallet';
  const icon = walletIcon(wallet.icon);
  if (icon) button.append(icon);
  button.append(TEXT.payWithWallet(wallet.name));
  button.addEventListener('click', () => pay(wallet, false));
  row.append(button);
  if (gasless) {
    const free = document.createElement('button');
    free.type = 'button';
    free.className = 'gasless';
    free.textContent = TEXT.payGasless;
    free.setAttribute('aria-label', TEXT.payGaslessWith(wallet.name));
    free.addEventListener('click', () => pay(wallet, true));
    row.append(free);
  }
  return row;
}

/** Pays the `chosen` payment (on the network named `network`) from `wallet`: connect, switch to the
 * payment's network, read what is still due and the chain id again, then one transfer of exactly
 * that, or with `authorize(provider, from, payment, units)` one signed authorization (its answer is
 * the hash). Nothing is sent unless the chain id matches. `say(text)` shows each step; `reread()`
 * is the payment as the service has it now, null when nothing is to be paid any more. The
 * transaction's hash, or '' when nothing was asked for. */
export async function walletPayment(wallet, chosen, network, { say, reread, authorize }) {
  const provider = wallet.provider;
  const target = `0x${chosen.chainId.toString(16)}`;
  say(TEXT.walletOpen(wallet.name));
  const accounts = await provider.request({ method: 'eth_requestAccounts' });
  const from = Array.isArray(accounts) && typeof accounts[0] === 'string' ? accounts[0] : '';
  if (!/^0x[0-9a-fA-F]{40}$/.test(from)) throw new WalletError(TEXT.walletNoAccount);
  if (!sameChain(await provider.request({ method: 'eth_chainId' }), target)) {
    say(TEXT.walletSwitch(network, chosen.chainId));
    try {
      await provider.request({ method: 'wallet_switchEthereumChain', params: [{ chainId: target }] });
    } catch (err) {
      if (err && err.code === 4902) throw new WalletError(TEXT.walletUnknownChain(network, chosen.chainId));
      throw err;
    }
  }
  const payment = await reread();
  if (!payment) return '';
  const units = outstandingUnits(payment);
  if (units <= 0n) throw new WalletError(TEXT.walletNothingLeft);
  if (payment.chainId !== chosen.chainId || !sameChain(await provider.request({ method: 'eth_chainId' }), target)) {
    throw new WalletError(TEXT.walletWrongChain(network, chosen.chainId));
  }
  say(TEXT.walletOpen(wallet.name));
  if (authorize) return authorize(provider, from, payment, units);
  const hash = await provider.request({
    method: 'eth_sendTransaction',
    params: [{ from, to: payment.tokenContract, data: transferData(payment.address, units) }],
  });
  return String(hash);
}

/** The ERC-3009 TransferWithAuthorization of exactly `units` from `from` to `to` (the payment's
 * deposit address), valid until `validBefore` (unix seconds), with a random nonce, signed by the
 * wallet under the token's EIP-712 `domain`: the body the service takes (POST …/authorization). */
export async function signedAuthorization(provider, from, to, units, validBefore, domain) {
  const message = { from, to, value: units.toString(), validAfter: 0, validBefore, nonce: randomNonce() };
  const typed = {
    types: { EIP712Domain: EIP712_DOMAIN, TransferWithAuthorization: AUTHORIZATION },
    primaryType: 'TransferWithAuthorization', domain, message,
  };
  const signature = await provider.request({ method: 'eth_signTypedData_v4', params: [from, JSON.stringify(typed)] });
  return { ...message, signature };
}
