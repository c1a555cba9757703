// What the customer reads about a live payment's state: the status line while the payment is
// followed (waiting, seen and confirming "k of N", partly paid), and the outcome once it is final.
import { decAdd, decCmp, paymentSums, transfersOf, unconfirmed } from './format.js';
import { FINAL, TEXT } from './texts.js';

/** The status line of a pending process's payment: {kind, text} (kind: '', 'seen' or 'partial').
 * `names`: the payment's {symbol, network, confirmations} (null confirmations: "k so far");
 * `expiring`: the countdown ran out, the service has not said final yet. */
export function paymentStatus(process, names, expiring) {
  const payment = process.payment;
  const { symbol, confirmations, network } = names;
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
    return { kind: 'seen', text: text + delayed };
  }
  if (decCmp(payment.amountPaid, '0') > 0) {
    return { kind: 'partial', text: TEXT.sendRest(payment.amountPaid, due, remaining, symbol) + delayed };
  }
  if (expiring) return { kind: '', text: TEXT.checkingInTime + delayed };
  return { kind: '', text: TEXT.waiting(`${due} ${symbol}`) + delayed };
}

/** A final state's {title, text}: `shown` is the price as shown; with a live payment (its token's
 * `symbol`), what it received says more. */
export function outcomeText(status, payment, shown, symbol) {
  let title = FINAL[status].title;
  let text = FINAL[status].text(shown);
  if (payment) {
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
  return { title, text };
}
