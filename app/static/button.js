/*
 * <payment-button process-id="…" public-key="pk_test_…" [api-base="https://pay.example"] [currency="EUR"]>
 *
 * The one script a merchant's page includes, as a classic <script src=".../payment-button/button.js">:
 * it imports the component, native ES modules beside it (button/element.js and its neighbours, no
 * build step), resolved against this script's own address, so the files always come from where
 * this one came from (the service, or a merchant's own copy of button.js with its button/ folder).
 * Attributes, events and styling hooks: button/element.js.
 */
(() => {
  'use strict';

  if (!window.customElements || customElements.get('payment-button')) return;
  // document.currentScript is only set while this file first runs, and not at all in a shadow root
  // or a bundle: then the page's tag that loaded it, then the first button's api-base.
  const tag = document.querySelector('script[src*="/payment-button/button.js"]');
  const button = document.querySelector('payment-button[api-base]');
  const src = (document.currentScript && document.currentScript.src) || (tag && tag.src) ||
    (button && new URL('payment-button/button.js', button.getAttribute('api-base').replace(/\/*$/, '/')).href);
  const failed = (err) => {
    console.error('payment-button: its modules could not be loaded', err);
    // The page still shows why, and tells the merchant's script as a service it cannot reach would.
    for (const el of document.querySelectorAll('payment-button')) {
      el.textContent = 'The payment button could not load. Please reload the page.';
      el.dispatchEvent(new CustomEvent('payment-error', {
        bubbles: true, composed: true,
        detail: { code: 'button_unavailable', message: 'The payment button could not load.', status: 0 },
      }));
    }
  };
  if (!src) {
    failed(new Error('cannot tell where button.js came from: set api-base'));
    return;
  }
  import(new URL('button/element.js', src).href).catch(failed);
})();
