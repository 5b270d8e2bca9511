/* The review page's editor (issue 46): a proposal drawn over its image (or the current slice of a volume),
   corrected with brush / erase / fill per class, undo / redo, then accepted, rejected or skipped. The next
   candidate of the queue comes as JSON (no reload). Labels travel as run-length pairs [value, count, ...] over
   the flat array (row-major, slices first), so the server can check the size before it allocates anything. */
(function () {
  "use strict";
  var root = document.getElementById("review");
  if (!root) { return; }
  var canvas = document.getElementById("review-canvas"), ctx = canvas.getContext("2d");
  var status = document.getElementById("review-status"), sizeInput = document.getElementById("review-size");
  var opacityInput = document.getElementById("review-opacity"), classSelect = document.getElementById("review-class");
  var sliceInput = document.getElementById("review-slice"), sliceBox = document.getElementById("review-slice-box");
  var csrf = root.dataset.csrf, nextUrl = root.dataset.next;
  var item = null, mask = null, depth = 1, height = 0, width = 0, slice = 0, tool = "brush";
  var images = {}, undo = [], redo = [], skipped = [], stroke = null, busy = false;

  function say(text, bad) {
    status.textContent = text;
    status.className = bad ? "alert alert-bad" : "alert alert-info";
  }
  function decode(runs, size) {
    var out = new Uint8Array(size), at = 0;
    for (var i = 0; i + 1 < runs.length; i += 2) { out.fill(runs[i], at, at + runs[i + 1]); at += runs[i + 1]; }
    return out;
  }
  function encode(values) {
    var runs = [], i = 0;
    while (i < values.length) {
      var v = values[i], j = i + 1;
      while (j < values.length && values[j] === v) { j++; }
      runs.push(v, j - i);
      i = j;
    }
    return runs;
  }
  function planeSize() { return height * width; }
  function offset() { return slice * planeSize(); }

  function draw() {
    if (!item) { return; }
    var img = images[slice];
    ctx.clearRect(0, 0, width, height);
    if (img && img.complete) { ctx.drawImage(img, 0, 0, width, height); }
    var base = ctx.getImageData(0, 0, width, height), px = base.data, alpha = Number(opacityInput.value) / 100;
    var palette = item.palette, start = offset(), labelled = 0;
    for (var p = 0; p < planeSize(); p++) {
      var c = mask[start + p];
      if (c > 0) {
        labelled++;
        var rgb = palette[c] || [255, 0, 255], q = p * 4;
        px[q] = Math.round(px[q] * (1 - alpha) + rgb[0] * alpha);
        px[q + 1] = Math.round(px[q + 1] * (1 - alpha) + rgb[1] * alpha);
        px[q + 2] = Math.round(px[q + 2] * (1 - alpha) + rgb[2] * alpha);
      }
    }
    ctx.putImageData(base, 0, 0);
    root.dataset.labelled = String(labelled);
    root.dataset.slice = String(slice);
    document.getElementById("review-undo").disabled = !undo.length;
    document.getElementById("review-redo").disabled = !redo.length;
  }
  function loadSlice(k) {
    if (images[k]) { draw(); return; }
    var img = new Image();
    img.alt = "";
    img.onload = function () { if (k === slice) { draw(); root.dataset.ready = "1"; } };
    img.onerror = function () { say("The image of " + item.candidate + " could not be loaded.", true); };
    img.src = item.image_url + (depth > 1 ? "?slice=" + k : "");
    images[k] = img;
  }
  function setSlice(k) {
    slice = Math.max(0, Math.min(depth - 1, k));
    sliceInput.value = String(slice);
    document.getElementById("review-slice-out").textContent = (slice + 1) + " / " + depth;
    loadSlice(slice);
    draw();
  }

  function point(ev) {
    var r = canvas.getBoundingClientRect();
    return [Math.floor((ev.clientX - r.left) * width / r.width), Math.floor((ev.clientY - r.top) * height / r.height)];
  }
  function remember() {
    undo.push({ slice: slice, plane: mask.slice(offset(), offset() + planeSize()) });
    if (undo.length > 100) { undo.shift(); }
    redo = [];
  }
  function paint(x, y, value) {
    var r = Math.max(0, Number(sizeInput.value) - 1) / 2, start = offset();
    for (var yy = Math.floor(y - r); yy <= Math.ceil(y + r); yy++) {
      for (var xx = Math.floor(x - r); xx <= Math.ceil(x + r); xx++) {
        if (xx < 0 || yy < 0 || xx >= width || yy >= height) { continue; }
        if ((xx - x) * (xx - x) + (yy - y) * (yy - y) <= r * r + 0.5) { mask[start + yy * width + xx] = value; }
      }
    }
  }
  function line(a, b, value) {
    var steps = Math.max(Math.abs(b[0] - a[0]), Math.abs(b[1] - a[1]), 1);
    for (var s = 0; s <= steps; s++) {
      paint(Math.round(a[0] + (b[0] - a[0]) * s / steps), Math.round(a[1] + (b[1] - a[1]) * s / steps), value);
    }
  }
  function fill(x, y, value) {
    var start = offset(), from = mask[start + y * width + x];
    if (from === value) { return; }
    var stack = [y * width + x];
    while (stack.length) {
      var p = stack.pop();
      if (mask[start + p] !== from) { continue; }
      mask[start + p] = value;
      var px = p % width;
      if (px > 0) { stack.push(p - 1); }
      if (px < width - 1) { stack.push(p + 1); }
      if (p >= width) { stack.push(p - width); }
      if (p < planeSize() - width) { stack.push(p + width); }
    }
  }
  function value() { return tool === "erase" ? 0 : Number(classSelect.value); }

  canvas.addEventListener("pointerdown", function (ev) {
    if (!item || ev.button !== 0) { return; }
    var at = point(ev);
    if (at[0] < 0 || at[1] < 0 || at[0] >= width || at[1] >= height) { return; }
    ev.preventDefault();
    remember();
    if (tool === "fill") { fill(at[0], at[1], value()); draw(); return; }
    stroke = at;
    if (canvas.setPointerCapture) { try { canvas.setPointerCapture(ev.pointerId); } catch (e) { /* synthetic */ } }
    paint(at[0], at[1], value());
    draw();
  });
  canvas.addEventListener("pointermove", function (ev) {
    if (!stroke) { return; }
    var at = point(ev);
    line(stroke, at, value());
    stroke = at;
    draw();
  });
  function endStroke() { stroke = null; }
  canvas.addEventListener("pointerup", endStroke);
  canvas.addEventListener("pointercancel", endStroke);

  function history(from, to) {
    var step = from.pop();
    if (!step) { return; }
    var start = step.slice * planeSize();
    to.push({ slice: step.slice, plane: mask.slice(start, start + planeSize()) });
    mask.set(step.plane, start);
    setSlice(step.slice);
  }
  function setTool(name) {
    tool = name;
    ["brush", "erase", "fill"].forEach(function (t) {
      var b = document.getElementById("review-tool-" + t);
      b.setAttribute("aria-pressed", String(t === name));
    });
    root.dataset.tool = name;
  }

  function show(data) {
    if (data.done) {
      item = null;
      root.dataset.candidate = "";
      ctx.clearRect(0, 0, canvas.width, canvas.height);
      document.getElementById("review-title").textContent = "No candidate left to review";
      say(data.message || "The queue is empty.", false);
      root.dataset.ready = "1";
      return;
    }
    item = data;
    var shape = data.shape;
    depth = shape.length === 3 ? shape[0] : 1;
    height = shape[shape.length - 2];
    width = shape[shape.length - 1];
    mask = decode(data.label.runs, depth * height * width);
    images = {};
    undo = [];
    redo = [];
    canvas.width = width;
    canvas.height = height;
    root.dataset.candidate = data.candidate;
    root.dataset.version = String(data.version);
    root.dataset.ready = "0";
    document.getElementById("review-title").textContent = "Candidate " + data.candidate;
    document.getElementById("review-facts").textContent = "version " + data.version + " by " + (data.author || "model") +
      " · state " + data.state + " · " + data.remaining + " more in the queue";
    classSelect.innerHTML = "";
    data.classes.forEach(function (name, k) {
      if (k === 0) { return; }
      var o = document.createElement("option");
      o.value = String(k);
      o.textContent = (k <= 9 ? k + ": " : "") + name;
      classSelect.appendChild(o);
    });
    sliceBox.hidden = depth < 2;
    sliceInput.max = String(depth - 1);
    setSlice(depth > 1 ? Math.floor(depth / 2) : 0);
    say("Correct the proposal, then accept (A), reject (R) or skip (S).", false);
  }
  function problem(d, status) { return (d && d.error && (d.error.message || d.error)) || ("The server answered " + status + "."); }
  function next() {
    busy = true;
    return fetch(nextUrl, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf },
      body: JSON.stringify({ skip: skipped })
    }).then(function (r) { return r.json().then(function (d) { return [r.ok, d, r.status]; }); })
      .then(function (res) { if (res[0]) { show(res[1]); } else { say(problem(res[1], res[2]), true); } })
      .catch(function () { say("The server did not answer; try again.", true); })
      .then(function () { busy = false; });
  }
  function decide(action) {
    if (!item || busy) { return; }
    busy = true;
    var body = { action: action, base_version: item.version };
    if (action === "accept") { body.mask = { encoding: "rle", shape: item.shape, runs: encode(mask) }; }
    var done = item.candidate;
    fetch(item.save_url, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf },
      body: JSON.stringify(body)
    }).then(function (r) { return r.json().then(function (d) { return [r.status, d]; }); })
      .then(function (res) {
        busy = false;
        if (res[0] === 200 || res[0] === 201) {
          if (action === "skip") { skipped.push(done); }
          root.dataset.saved = done + ":" + action + ":" + res[1].version;
          var said = res[1].message;
          return next().then(function () { say(said + " " + status.textContent, false); });
        }
        root.dataset.error = String(res[0]);
        say(problem(res[1], res[0]), true);
        return null;
      })
      .catch(function () { busy = false; say("The server did not answer; nothing was saved. Try again.", true); });
  }

  ["brush", "erase", "fill"].forEach(function (t) {
    document.getElementById("review-tool-" + t).addEventListener("click", function () { setTool(t); });
  });
  document.getElementById("review-undo").addEventListener("click", function () { history(undo, redo); });
  document.getElementById("review-redo").addEventListener("click", function () { history(redo, undo); });
  document.getElementById("review-accept").addEventListener("click", function () { decide("accept"); });
  document.getElementById("review-reject").addEventListener("click", function () { decide("reject"); });
  document.getElementById("review-skip").addEventListener("click", function () { decide("skip"); });
  opacityInput.addEventListener("input", draw);
  sliceInput.addEventListener("input", function () { setSlice(Number(sliceInput.value)); });
  sizeInput.addEventListener("input", function () {
    document.getElementById("review-size-out").textContent = sizeInput.value + " px";
  });
  document.addEventListener("keydown", function (ev) {
    var target = ev.target;
    if (target && (target.tagName === "INPUT" && target.type !== "range" || target.tagName === "SELECT" ||
        target.tagName === "TEXTAREA")) { return; }
    var key = ev.key, mod = ev.ctrlKey || ev.metaKey;
    if (mod && (key === "z" || key === "Z")) { history(ev.shiftKey ? redo : undo, ev.shiftKey ? undo : redo); }
    else if (mod && (key === "y" || key === "Y")) { history(redo, undo); }
    else if (mod || ev.altKey) { return; }
    else if (key === "b") { setTool("brush"); }
    else if (key === "e") { setTool("erase"); }
    else if (key === "f") { setTool("fill"); }
    else if (key === "a") { decide("accept"); }
    else if (key === "r") { decide("reject"); }
    else if (key === "s") { decide("skip"); }
    else if (key === "[" || key === "]") {
      sizeInput.value = String(Number(sizeInput.value) + (key === "]" ? 1 : -1));
      sizeInput.dispatchEvent(new Event("input"));
    } else if ((key === "PageUp" || key === "PageDown") && depth > 1) { setSlice(slice + (key === "PageUp" ? 1 : -1)); }
    else if (/^[1-9]$/.test(key) && classSelect.querySelector('option[value="' + key + '"]')) { classSelect.value = key; }
    else { return; }
    ev.preventDefault();
  });
  setTool("brush");
  next();
}());
