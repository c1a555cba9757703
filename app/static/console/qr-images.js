// The console's QR codes: every <img data-qr="text"> gets `text` drawn by the payment button's own
// encoder (app/static/qr.js, served before this file in one scope at /dashboard/qr.js), as an
// SVG data URL: nothing is sent to a third party, and no inline script or style is needed.
for (const img of document.querySelectorAll("img[data-qr]")) {
  img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(qrSvg(img.dataset.qr));
}
