// Inside the Airflow UI the pages sit in an <iframe sandbox="allow-scripts allow-same-origin allow-forms
// allow-downloads"> (Airflow 3.3's plugin page): without allow-popups and allow-top-navigation, a link with
// target="_blank" (an article) or target="_top" (an Airflow page) does nothing there. The frame is
// same-origin, so the click is handed to the Airflow window, which opens the article in a new tab or goes
// to the Airflow page itself. Outside a frame, or when the top window is another origin, links work as
// written and this does nothing. The only script of the pages; no inline script anywhere (CSP).
(function () {
  "use strict";
  if (window.top === window) return;
  var top;
  try {
    top = window.top;
    void top.location.href; // throws when the top window is another origin
  } catch (e) {
    return;
  }
  document.addEventListener("click", function (event) {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
    var link = event.target.closest ? event.target.closest("a[target]") : null;
    if (!link || (link.target !== "_blank" && link.target !== "_top")) return;
    try {
      // a function of the top window's own realm: the sandbox of this frame does not bind it
      var go = new top.Function("url", "target",
        "if (target === '_top') { window.location.assign(url); }" +
        " else { var w = window.open(url, '_blank', 'noopener,noreferrer'); if (w) { w.opener = null; } }");
      go(link.href, link.target);
      event.preventDefault();
    } catch (e) {
      // leave the click to the browser
    }
  });
})();
