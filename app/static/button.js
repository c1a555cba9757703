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
  // document.currentScript is only set while this file first runs.
  const src = (document.currentScript && document.currentScript.src) || window.location.href;
  import(new URL('button/element.js', src).href).catch((err) => {
    console.error('payment-button: its modules could not be loaded', err);
  });
})();
