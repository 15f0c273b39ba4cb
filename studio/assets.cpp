// The studio's CSS and JavaScript. Narrow screens (a phone's 375px) get one column, tables that
// scroll inside their box, and wrapped SQL, so the page itself never scrolls sideways.
#include "studio/assets.h"

namespace pgwarden::studio {

const std::string_view kStudioCss = R"css(
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2933;background:#f5f7fa}
a{color:#2457a5}
header{display:flex;flex-wrap:wrap;align-items:center;gap:.5em 1.2em;padding:.6em 1em;background:#1f2933;color:#fff}
header a{color:#fff;text-decoration:none}
header .brand{font-weight:700}
header nav{display:flex;flex-wrap:wrap;gap:.2em .9em}
header nav a.active{text-decoration:underline}
.live{margin-left:auto;display:flex;gap:1em;font-size:13px}
.live b{font-variant-numeric:tabular-nums}
main{padding:1em;max-width:1200px;margin:0 auto}
h1{font-size:1.3em;margin:.2em 0 .6em}
h2{font-size:1.1em;margin:1.2em 0 .4em}
form.filters{display:flex;flex-wrap:wrap;gap:.4em .8em;align-items:flex-end;padding:.6em 1em;background:#e4e9f0}
form.filters label{display:flex;flex-direction:column;font-size:12px;color:#52606d}
form.filters input,form.filters select{font:inherit;padding:.2em .3em;width:9em;max-width:40vw}
form.filters button{font:inherit;padding:.25em .8em}
.tablebox{overflow-x:auto;background:#fff;border:1px solid #d3dae3}
table{border-collapse:collapse;width:100%}
th,td{padding:.3em .5em;border-bottom:1px solid #e4e9f0;text-align:left;vertical-align:top;white-space:nowrap}
th{background:#f0f3f7;font-weight:600}
td.n{text-align:right;font-variant-numeric:tabular-nums}
td.sql{white-space:normal;min-width:16em;max-width:40em;font-family:ui-monospace,monospace;font-size:12px;word-break:break-word}
.bad{color:#b8433e;font-weight:600}
.warn{color:#a8620f;font-weight:600}
ol.timeline{list-style:none;padding:0;margin:0}
ol.timeline>li{background:#fff;border:1px solid #d3dae3;border-left:5px solid #4f9a57;margin:0 0 .7em;padding:.5em .7em}
ol.timeline>li.denied,ol.timeline>li.budget{border-left-color:#b8433e}
ol.timeline>li.error{border-left-color:#7a5ea8}
ol.timeline>li.warned{border-left-color:#d9822b}
.stmt-head{display:flex;flex-wrap:wrap;gap:.2em .9em;font-size:13px;color:#52606d}
.stmt-head .n{font-weight:700;color:#1f2933}
.outcome{font-weight:600;color:#1f2933}
pre.sql{margin:.4em 0;padding:.4em .5em;background:#f5f7fa;white-space:pre-wrap;word-break:break-word;font-size:12.5px}
ul.findings{margin:.3em 0;padding-left:1.2em}
ul.findings li{margin:.2em 0;word-break:break-word}
.tool{font-size:12.5px;word-break:break-word}
.tool code{white-space:pre-wrap}
figure.chart{margin:0 0 1em;background:#fff;border:1px solid #d3dae3;padding:.5em}
figure.chart figcaption{font-weight:600;margin-bottom:.3em}
figure.chart svg{width:100%;max-width:760px;height:auto;display:block}
svg .label{font-size:11px;fill:#3e4c59}
svg .value{font-size:11px;fill:#52606d}
svg .empty{font-size:13px;fill:#7b8794}
svg .axis{stroke:#9aa5b1}
svg a:hover rect{fill:#d9822b}
.note{color:#52606d;font-size:13px}
.error-box{background:#fde8e8;border:1px solid #e3a0a0;padding:.6em}
@media (max-width:600px){
 header{padding:.5em .7em}
 .live{margin-left:0;width:100%}
 main{padding:.6em}
 form.filters{padding:.5em .7em}
 form.filters input,form.filters select{width:8.5em}
}
)css";

const std::string_view kStudioJs = R"js("use strict";
(function () {
  var sessions = document.getElementById("live-sessions");
  var rate = document.getElementById("live-rate");
  if (!sessions || !rate) return;
  var last = null;
  function poll() {
    fetch("/studio/api/live", {credentials: "same-origin", cache: "no-store"})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (j) {
        if (!j) return;
        sessions.textContent = String(j.sessions);
        var now = Date.now();
        if (last && now > last.t && j.statements >= last.statements) {
          rate.textContent = ((j.statements - last.statements) * 1000 / (now - last.t)).toFixed(1);
        }
        last = {t: now, statements: j.statements};
      })
      .catch(function () {});
  }
  poll();
  setInterval(poll, 2000);
})();
)js";

// Named by every page, so that a browser does not ask the listener for /favicon.ico.
const std::string_view kStudioIcon =
    R"svg(<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#1f2933"/><rect x="3" y="9" width="2" height="4" fill="#d9822b"/><rect x="7" y="5" width="2" height="8" fill="#fff"/><rect x="11" y="3" width="2" height="10" fill="#3b6ea5"/></svg>
)svg";

}  // namespace pgwarden::studio
