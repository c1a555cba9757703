// The checkout page's one script (its CSP allows no inline script). When the payment button says the
// payment completed, or the seller cancelled the process, the page is read again from the server
// a moment later: it then shows the receipt (or the cancellation) and, with a success URL, sends
// the customer on to the shop. The server's answer, not this event, decides what the page shows.
(() => {
  let reloading = false;
  const reload = () => {
    if (reloading) return;
    reloading = true;
    setTimeout(() => window.location.reload(), 1200);
  };
  document.addEventListener('payment-success', reload);
  document.addEventListener('payment-cancelled', reload);
})();
