// Tell RequireJS where the vendored anywidget front end lives (next to this
// file; book/_ext/offline_assets.py copies it from the installed Python
// package at build time), so the widgets manager finds it without a CDN.
(function () {
  var here = document.currentScript.src.replace(/[^/]*$/, "");
  window.requirejs.config({
    paths: {
      anywidget: here + "anywidget/index",
      // The manager finds its icon fonts next to the module URL RequireJS
      // gives it; without this it looks for them beside the page.
      "@jupyter-widgets/html-manager/dist": here + "html-manager",
    },
  });
})();
