/* perfcore report charts: reads each report's JSON block and draws it with uPlot (inlined beside
   this file). Runs once per report root, so several reports in one notebook page each get theirs. */
(function () {
  "use strict";
  var U = window.uPlot;

  // Readable numbers at every scale: ms under a second, s above; %, MiB/GiB; never an exponent.
  function num(v, digits) {
    if (v == null || !isFinite(v)) return "–";
    var a = Math.abs(v);
    if (a === 0) return "0";
    var s;
    if (a >= 100) s = v.toFixed(0);
    else if (a >= 10) s = v.toFixed(digits == null ? 1 : Math.min(digits, 1));
    else if (a >= 1) s = v.toFixed(digits == null ? 2 : digits);
    else s = v.toPrecision(2);
    return String(parseFloat(s));  // 20 ms, not 20.0 ms
  }
  function fmt(v, unit) {
    if (v == null || !isFinite(v)) return "–";
    if (unit === "ms") {
      if (Math.abs(v) >= 1000) return num(v / 1000) + " s";
      if (Math.abs(v) > 0 && Math.abs(v) < 0.1) return num(v * 1000) + " µs";
      return num(v) + " ms";
    }
    if (unit === "%") return num(v, 0) + "%";
    if (unit === "MiB") return Math.abs(v) >= 1024 ? num(v / 1024) + " GiB" : num(v) + " MiB";
    if (unit === "GiB") return num(v) + " GiB";
    if (unit === "samples/s") return num(v) + "/s";
    if (unit === "step") return Math.round(v).toLocaleString("en-US");
    return num(v) + (unit ? " " + unit : "");
  }
  function axisValues(unit) {
    return function (u, splits) { return splits.map(function (v) { return fmt(v, unit); }); };
  }
  // The y axis is as wide as its widest label, so no label is ever clipped.
  function axisSize(u, values) {
    if (!values) return 40;
    var w = 0;
    for (var i = 0; i < values.length; i++) w = Math.max(w, String(values[i]).length);
    return Math.ceil(w * 7) + 16;
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }
  function width(box) { return Math.max(260, Math.floor(box.getBoundingClientRect().width || box.clientWidth || 600)); }

  // A readout under a chart: a colour chip and value per series, updated as the cursor moves.
  function readout(box, spec) {
    var r = el("div", "pc-readout");
    var head = el("span", "pc-at", spec.hint || "hover for values; drag to zoom, double-click to reset");
    r.appendChild(head);
    r.appendChild(document.createTextNode(" "));
    var cells = spec.series.map(function (s) {
      var c = el("span", "pc-item");
      var chip = el("i", "pc-chip");
      chip.style.background = s.color;
      c.appendChild(chip);
      c.appendChild(document.createTextNode(s.label + " "));
      var v = el("b", "pc-val", "");
      c.appendChild(v);
      r.appendChild(c);
      r.appendChild(document.createTextNode(" "));
      return v;
    });
    box.appendChild(r);
    return function (i) {
      if (i == null) return;
      head.textContent = spec.at(i);
      spec.series.forEach(function (s, k) { cells[k].textContent = fmt(s.values[i], s.unit || spec.unit); });
    };
  }

  function shade(spanList, color) {
    return function (u) {
      if (!spanList) return;
      var ctx = u.ctx;
      ctx.save();
      ctx.fillStyle = color;
      spanList.forEach(function (s) {
        var x0 = u.valToPos(s[0], "x", true), x1 = u.valToPos(s[1], "x", true);
        var l = Math.max(x0, u.bbox.left), r = Math.min(x1, u.bbox.left + u.bbox.width);
        if (r > l) ctx.fillRect(l, u.bbox.top, r - l, u.bbox.height);
      });
      ctx.restore();
    };
  }
  function vlines(lines) {
    return function (u) {
      if (!lines) return;
      var ctx = u.ctx;
      ctx.save();
      lines.forEach(function (ln, k) {
        var x = u.valToPos(ln.x, "x", true);
        ctx.strokeStyle = ln.color || "#111";
        ctx.setLineDash(ln.dash || []);
        ctx.lineWidth = 1.5 * (window.devicePixelRatio || 1);
        ctx.beginPath();
        ctx.moveTo(x, u.bbox.top);
        ctx.lineTo(x, u.bbox.top + u.bbox.height);
        ctx.stroke();
        ctx.fillStyle = ln.color || "#111";
        ctx.font = (11 * (window.devicePixelRatio || 1)) + "px sans-serif";
        ctx.fillText(ln.label, x + 4, u.bbox.top + (12 + 13 * k) * (window.devicePixelRatio || 1));
      });
      ctx.restore();
    };
  }

  // Charts over the run share their x scale: zooming one zooms the others, the cursor moves in all.
  function syncZoom(group) {
    return function (u, key) {
      if (key !== "x" || group.busy) return;
      group.busy = true;
      var mn = u.scales.x.min, mx = u.scales.x.max;
      group.charts.forEach(function (o) { if (o !== u) o.setScale("x", { min: mn, max: mx }); });
      group.busy = false;
    };
  }

  // Series over the run (x = step). Stacked series are drawn tallest first so each fill covers
  // the one below it; the readout lists them in their own order with their own (not summed) values.
  function timeline(box, c, group) {
    var x = c.x;
    var n = x.length;
    var xs = x.concat([c.x_end]);
    var ser = c.series;
    var data = [xs];
    var uSeries = [{ label: c.x_label || "step", value: function (u, v) { return fmt(v, "step"); } }];
    var order = ser.map(function (_, i) { return i; });
    if (c.stacked) order.reverse();
    var cum = [];
    if (c.stacked) {
      var acc = new Array(n).fill(0);
      ser.forEach(function (s, i) {
        acc = acc.map(function (a, k) { return a + (s.values[k] || 0); });
        cum[i] = acc.slice();
      });
    }
    order.forEach(function (i) {
      var s = ser[i];
      var vals = c.stacked ? cum[i] : s.values;
      data.push(vals.concat([vals[n - 1]]));
      uSeries.push({
        label: s.label, stroke: s.line ? s.color : (c.stacked ? s.color : s.color),
        width: c.stacked ? 0 : 1.5, fill: c.stacked ? s.color : (s.fill ? s.color + "33" : undefined),
        dash: s.dash, points: { show: false }, spanGaps: !!s.gaps,
        paths: (c.stacked || c.stepped) ? U.paths.stepped({ align: 1 }) : undefined,
        scale: s.scale || "y"
      });
    });
    (c.lines || []).forEach(function (s) {  // unstacked lines over a stack (median, p90)
      data.push(s.values.concat([s.values[n - 1]]));
      uSeries.push({ label: s.label, stroke: s.color, width: 1.2, dash: s.dash, points: { show: false },
                     paths: U.paths.stepped({ align: 1 }) });
    });
    var upd = readout(box, {
      unit: c.unit, series: ser.concat(c.lines || []),
      at: function (i) {
        var a = x[i], b = (i + 1 < n ? x[i + 1] : c.x_end) - 1;
        return (b > a ? "steps " + fmt(a, "step") + "–" + fmt(b, "step") : "step " + fmt(a, "step")) +
               (c.total ? " · total " + fmt(c.total[i], c.unit) : "") + (c.warm && c.warm[i] ? " (warm-up)" : "");
      }
    });
    var axes = [
      { values: function (u, splits) { return splits.map(function (v) { return fmt(v, "step"); }); },
        label: c.x_label || "step", labelSize: 18, size: 36 },
      // One width for every y axis of a group, so the charts' x axes line up exactly.
      { values: axisValues(c.unit), size: group ? 76 : axisSize, label: c.y_label, labelSize: 18 }
    ];
    var scales = { x: { time: false }, y: { range: function (u, mn, mx) { return [0, c.y_max != null ? c.y_max : (mx > 0 ? mx * 1.08 : 1)]; } } };
    var opts = {
      width: width(box), height: c.height || 200, series: uSeries, axes: axes, scales: scales,
      legend: { show: false },
      cursor: { sync: group ? { key: group.key, setSeries: false } : undefined, drag: { x: true, y: false },
                points: { show: false } },
      hooks: {
        drawClear: [shade(c.shade, "rgba(80,80,80,0.13)")],
        setCursor: [function (u) { upd(u.cursor.idx != null && u.cursor.idx < n ? u.cursor.idx : null); }],
        setScale: group ? [syncZoom(group)] : []
      }
    };
    var chart = new U(opts, data, box.querySelector(".pc-plot") || box);
    if (group) group.charts.push(chart);
    box.appendChild(readoutFirst(box));
    return chart;
  }
  function readoutFirst(box) { return box.querySelector(".pc-readout"); }

  // Histogram of step times: bars per bin, p50 / p90 marked.
  function histogram(box, c) {
    var n = c.counts.length;
    var mids = [];
    for (var i = 0; i < n; i++) mids.push((c.edges[i] + c.edges[i + 1]) / 2);
    var upd = readout(box, {
      unit: "", series: [{ label: "steps", values: c.counts, color: c.color, unit: "" }],
      hint: "hover a bar for its range and count",
      at: function (i) { return fmt(c.edges[i], "ms") + "–" + fmt(c.edges[i + 1], "ms"); }
    });
    var opts = {
      width: width(box), height: c.height || 200, legend: { show: false },
      series: [{ label: "step time" }, { label: "steps", fill: c.color, stroke: c.color, width: 0,
                 paths: U.paths.bars({ size: [0.92, 80] }), points: { show: false } }],
      axes: [{ values: axisValues("ms"), label: "step time", labelSize: 18, size: 36 },
             { values: function (u, s) { return s.map(function (v) { return num(v, 0); }); }, size: axisSize,
               label: "steps", labelSize: 18, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6] }],
      scales: { x: { time: false, range: [c.edges[0], c.edges[n]] }, y: { range: function (u, mn, mx) { return [0, mx * 1.15 || 1]; } } },
      cursor: { drag: { x: false, y: false }, points: { show: false } },
      hooks: { draw: [vlines(c.marks)], setCursor: [function (u) { upd(u.cursor.idx); }] }
    };
    new U(opts, [mids, c.counts], box.querySelector(".pc-plot") || box);
    box.appendChild(readoutFirst(box));
  }

  // Stacked bars over named rows (experiments, ranks): x = index, names on the axis.
  function stackbars(box, c) {
    var n = c.names.length;
    var xs = c.names.map(function (_, i) { return i; });
    var order = c.series.map(function (_, i) { return i; }).reverse();
    var cum = [], acc = new Array(n).fill(0);
    c.series.forEach(function (s, i) { acc = acc.map(function (a, k) { return a + (s.values[k] || 0); }); cum[i] = acc.slice(); });
    var data = [xs], uSeries = [{ label: "row" }];
    order.forEach(function (i) {
      var s = c.series[i];
      data.push(cum[i]);
      uSeries.push({ label: s.label, fill: s.color, stroke: s.color, width: 0, points: { show: false },
                     paths: U.paths.bars({ size: [0.6, 120] }) });
    });
    var upd = readout(box, {
      unit: c.unit, series: c.series, hint: "hover a bar for its values",
      at: function (i) { return c.names[i] + (c.totals ? " · " + c.totals[i] : ""); }
    });
    var opts = {
      width: width(box), height: c.height || 220, legend: { show: false }, series: uSeries,
      axes: [{ values: function (u, splits) { return splits.map(function (v) { return Number.isInteger(v) && c.names[v] != null ? c.names[v] : ""; }); },
               size: 40, gap: 4, incrs: [1], font: "11px sans-serif" },
             { values: axisValues(c.unit), size: axisSize, label: c.y_label, labelSize: 18 }],
      scales: { x: { time: false, range: [-0.6, n - 0.4] }, y: { range: function (u, mn, mx) { return [0, mx * 1.1 || 1]; } } },
      cursor: { drag: { x: false, y: false }, points: { show: false } },
      hooks: { setCursor: [function (u) { upd(u.cursor.idx); }] }
    };
    new U(opts, data, box.querySelector(".pc-plot") || box);
    box.appendChild(readoutFirst(box));
  }

  // A tooltip for any element with data-tip (heatmap cells, bars drawn in HTML).
  function tips(root) {
    var tip = el("div", "pc-tip");
    tip.style.display = "none";
    root.appendChild(tip);
    root.addEventListener("mouseover", function (ev) {
      var t = ev.target.closest ? ev.target.closest("[data-tip]") : null;
      if (!t || !root.contains(t)) { tip.style.display = "none"; return; }
      tip.textContent = t.getAttribute("data-tip");
      tip.style.display = "block";
      var rb = root.getBoundingClientRect(), tb = t.getBoundingClientRect();
      tip.style.left = (tb.left - rb.left + tb.width / 2) + "px";
      tip.style.top = (tb.top - rb.top - 6) + "px";
    });
    root.addEventListener("mouseleave", function () { tip.style.display = "none"; });
  }

  function draw(root) {
    if (root.getAttribute("data-pc-drawn")) return;
    var src = root.querySelector("script.pc-data");
    root.setAttribute("data-pc-drawn", "1");
    tips(root);
    if (!src || !U) return;
    var spec = JSON.parse(src.textContent);
    var groups = {};
    (spec.charts || []).forEach(function (c) {
      var box = root.querySelector("[data-chart='" + c.id + "']");
      if (!box) return;
      box.innerHTML = "";  // the static picture (for viewers that run no script) gives way to the chart
      box.appendChild(el("div", "pc-plot"));
      var g = null;
      if (c.group) g = groups[c.group] || (groups[c.group] = { key: c.group + "-" + Math.random().toString(36).slice(2), charts: [] });
      if (c.kind === "timeline") timeline(box, c, g);
      else if (c.kind === "histogram") histogram(box, c);
      else if (c.kind === "stackbars") stackbars(box, c);
    });
  }

  var roots = document.querySelectorAll(".perfcore");
  for (var i = 0; i < roots.length; i++) {
    try { draw(roots[i]); } catch (e) { console.error("perfcore chart:", e); }
  }
})();
