// Fills the status page from /api/status once a second. With --api-key the status needs the key: the
// page asks for it and keeps it for this browser tab only.
"use strict";

const kPollMs = 1000;
let updates = 0;

function set(id, text) {
  document.getElementById(id).textContent = text;
}

function bytes(n) {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let u = 0;
  while (n >= 1000 && u + 1 < units.length) { n /= 1000; u++; }
  return u === 0 ? `${n} B` : `${n.toFixed(2)} ${units[u]}`;
}

function duration(s) {
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return h ? `${h} h ${m} min` : m ? `${m} min ${Math.floor(s % 60)} s` : `${s.toFixed(0)} s`;
}

function rows(tbody, list) {
  tbody.replaceChildren(...list.map((cells) => {
    const tr = document.createElement("tr");
    cells.forEach((c, i) => {
      const td = document.createElement("td");
      td.textContent = c;
      if (i > 0) td.className = "num";
      tr.appendChild(td);
    });
    return tr;
  }));
}

function show(s) {
  set("model-id", s.model.id);
  set("family", s.model.family);
  set("architecture", s.model.architecture);
  set("weights", s.model.weights);
  set("max-ctx", `${s.model.max_ctx} tokens`);
  set("backend", s.placement.backend);
  set("backend-detail", s.placement.detail);
  set("fallback-target", s.placement.fallback_target || "(the backend is the CPU)");
  set("backend-stats", s.placement.backend_stats || "none on this backend");

  set("tok-s", s.tokens.tokens_per_second.toFixed(1));
  set("answered", s.requests.answered);
  set("running", `${s.requests.running} (mean batch ${s.requests.batch_mean.toFixed(1)})`);
  set("queued", s.requests.queued);
  set("queue-limit", s.requests.queue_limit);
  set("generations", s.requests.generations);
  set("cancelled", s.requests.cancelled);
  set("prompt", s.tokens.prompt);
  set("prompt-cached", s.tokens.prompt_cached);
  set("generated", s.tokens.generated);
  set("uptime", duration(s.uptime_seconds));

  const e = s.experts;
  set("hit-rate", `${(100 * e.hit_rate).toFixed(1)}%`);
  set("hits", e.hits);
  set("misses", e.misses);
  set("ram-cached", bytes(e.ram_cached_bytes));
  set("ram-budget", e.ram_budget_bytes ? bytes(e.ram_budget_bytes) : "unlimited");
  set("expert-total", bytes(e.total_bytes));
  set("bytes-read", bytes(e.bytes_read));
  set("evictions", e.evictions);
  set("pinned", e.pinned);

  set("fallbacks", s.fallbacks.total);
  set("faults", s.fallbacks.faults);
  set("host-steps", s.host_steps);
  document.getElementById("fallbacks").className = s.fallbacks.total ? "warn" : "";
  rows(document.getElementById("ops"),
       s.ops.filter((o) => o.native + o.host_steps + o.fallback > 0)
           .map((o) => [o.op, o.native, o.host_steps, o.fallback]));
  rows(document.getElementById("by-format"),
       Object.entries(s.fallbacks.by_format).map(([what, n]) => [`fallback ${what}`, n]));
}

async function poll() {
  try {
    const key = sessionStorage.getItem("coli-key");
    const res = await fetch("/api/status", { headers: key ? { Authorization: `Bearer ${key}` } : {} });
    if (res.status === 401) {
      document.getElementById("auth").style.display = "block";
      set("state", "needs the API key");
    } else if (!res.ok) {
      set("state", `status answered HTTP ${res.status}`);
    } else {
      document.getElementById("auth").style.display = "none";
      show(await res.json());
      set("updates", ++updates);
      set("state", `live, ${new Date().toLocaleTimeString()}`);
    }
  } catch (err) {
    set("state", `server unreachable (${err.message})`);
  }
  setTimeout(poll, kPollMs);
}

// The next poll uses the key.
document.getElementById("key-set").addEventListener("click", () => {
  sessionStorage.setItem("coli-key", document.getElementById("key").value);
});
poll();
