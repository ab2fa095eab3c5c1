// koinon chat: progressive enhancement only. Every form works without this file.
"use strict";

(function () {
  // Live activity: the run's events over SSE (session cookie), then the sealed answer,
  // whose fragment carries the activity as the server stored it.
  function follow(box) {
    const status = box.querySelector("[data-activity-status]");
    const list = box.querySelector("[data-tools]");
    const labels = Object.assign({ tools: {}, steps: {}, states: {}, found: "%(count)s" },
      JSON.parse(box.dataset.labels || "{}"));
    const source = new EventSource(box.dataset.events, { withCredentials: true });
    let done = false;
    function toolText(tool, state, count) {
      const parts = [labels.tools[tool] || tool, labels.states[state] || state];
      if (state === "succeeded") parts.push(labels.found.replace("%(count)s", String(count)));
      return parts.join(" · ");
    }
    function finish() {
      if (done) return;
      done = true;
      source.close();
      fetch(box.dataset.fragment, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (response) {
          if (!response.ok) throw new Error(String(response.status));
          return response.text();
        })
        .then(function (html) {
          const container = box.closest("[data-run-answers]");
          const template = document.createElement("template");
          template.innerHTML = html; // rendered (and escaped) by the server
          container.replaceWith(template.content);
        })
        .catch(function () {
          status.textContent = box.dataset.labelTimeout;
        });
    }
    const tools = (box.dataset.tools || "").split(" ").filter(Boolean);
    function row(tool) {
      const item = document.createElement("li");
      item.dataset.tool = tool;
      item.dataset.state = "running";
      item.textContent = toolText(tool, "running", 0);
      list.appendChild(item);
      return item;
    }
    function stepsDone() {
      list.querySelectorAll("li[data-step][data-state=running]").forEach(function (li) {
        li.dataset.state = "succeeded";
      });
    }
    source.addEventListener("started", function () {
      status.textContent = box.dataset.labelStarted;
      // The run's tools start together; each `tool` event then reports one that ended.
      list.replaceChildren();
      tools.forEach(row);
    });
    source.addEventListener("generation", function () {
      list.replaceChildren();
    });
    source.addEventListener("step", function (event) {
      const data = JSON.parse(event.data);
      stepsDone();
      // Each step named once: one entered again (the model planning, then selecting) moves
      // to the end of the list, as the server lists it after a reload.
      const item = Array.prototype.find.call(list.children, function (li) {
        return li.dataset.step === data.step;
      }) || document.createElement("li");
      item.dataset.step = data.step;
      item.dataset.state = "running";
      item.textContent = labels.steps[data.step] || data.step;
      list.appendChild(item);
      status.textContent = item.textContent + "…";
    });
    source.addEventListener("tool", function (event) {
      const data = JSON.parse(event.data);
      const item = Array.prototype.find.call(list.children, function (li) {
        return li.dataset.tool === data.tool && li.dataset.state === "running";
      }) || row(data.tool);
      item.dataset.state = data.state;
      item.textContent = toolText(data.tool, data.state, data.result_count);
    });
    source.addEventListener("completed", finish);
    source.addEventListener("failed", finish);
    source.addEventListener("timeout", function () {
      done = true;
      source.close();
      status.textContent = box.dataset.labelTimeout;
    });
  }

  // Upload: the file goes up, then its extraction is polled until admitted or failed.
  function upload(form) {
    const status = form.querySelector("[data-upload-status]");
    const progress = form.querySelector("[data-upload-progress]");
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      progress.hidden = false;
      progress.removeAttribute("value");
      status.textContent = status.dataset.labelUploading;
      fetch(form.action, {
        method: "POST",
        body: new FormData(form),
        credentials: "same-origin",
        headers: { Accept: "application/json" },
      })
        .then(function (response) {
          return response.json().then(function (body) {
            return { ok: response.ok, body: body };
          });
        })
        .then(function (result) {
          if (!result.ok) {
            progress.hidden = true;
            status.textContent = (result.body.error && result.body.error.message) || status.dataset.labelFailed;
            return;
          }
          poll(result.body);
        })
        .catch(function () {
          progress.hidden = true;
          status.textContent = status.dataset.labelFailed;
        });
    });
    function poll(file) {
      status.textContent = file.title + ": " + file.message;
      if (file.state !== "extracting") {
        progress.hidden = true;
        window.setTimeout(function () { window.location.reload(); }, 600);
        return;
      }
      progress.value = file.progress;
      progress.max = 100;
      window.setTimeout(function () {
        fetch(file.status_url, { credentials: "same-origin", headers: { Accept: "application/json" } })
          .then(function (response) { return response.json(); })
          .then(function (body) { poll(Object.assign({}, file, body)); })
          .catch(function () { status.textContent = status.dataset.labelFailed; });
      }, 500);
    }
  }

  // Library uploads: each chosen file goes up on its own request (one refused file loses
  // nothing of the others), gets a line with its progress, and is polled until its
  // extraction is admitted or failed; then the page shows the new state.
  function uploadMany(form) {
    const list = form.querySelector("[data-upload-list]");
    const input = form.querySelector("input[type=file]");
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      const files = Array.prototype.slice.call(input.files);
      list.textContent = "";
      const pending = files.map(function (file) {
        const item = document.createElement("li");
        const label = document.createElement("span");
        const progress = document.createElement("progress");
        label.textContent = file.name + ": " + list.dataset.labelUploading;
        item.appendChild(label);
        item.appendChild(progress);
        list.appendChild(item);
        const body = new FormData();
        form.querySelectorAll("input[type=hidden]").forEach(function (field) {
          body.append(field.name, field.value);
        });
        body.append("file", file, file.name);
        return fetch(form.action, {
          method: "POST", body: body, credentials: "same-origin",
          headers: { Accept: "application/json" },
        })
          .then(function (response) { return response.json(); })
          .then(function (result) {
            const outcome = result.files ? result.files[0] : null;
            if (!outcome || !outcome.ok) {
              progress.remove();
              label.textContent = file.name + ": " + ((outcome && outcome.message) ||
                (result.error && result.error.message) || list.dataset.labelFailed);
              item.dataset.uploadState = "failed";
              return;
            }
            return follow(outcome, label, progress, item);
          })
          .catch(function () {
            progress.remove();
            label.textContent = file.name + ": " + list.dataset.labelFailed;
            item.dataset.uploadState = "failed";
          });
      });
      Promise.all(pending).then(function () {
        if (list.querySelector("[data-upload-state=admitted]")) {
          window.setTimeout(function () { window.location.reload(); }, 1500);
        }
      });
    });
    function follow(outcome, label, progress, item) {
      return new Promise(function (resolve) {
        function poll() {
          fetch(outcome.status_url, { credentials: "same-origin", headers: { Accept: "application/json" } })
            .then(function (response) { return response.json(); })
            .then(function (state) {
              label.textContent = outcome.name + ": " + state.message;
              if (state.state === "extracting") {
                progress.max = 100;
                progress.value = state.progress;
                window.setTimeout(poll, 500);
                return;
              }
              progress.remove();
              item.dataset.uploadState = state.state;
              resolve();
            })
            .catch(function () { label.textContent = outcome.name + ": " + list.dataset.labelFailed; resolve(); });
        }
        poll();
      });
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-live-run]").forEach(follow);
    document.querySelectorAll("[data-upload-form]").forEach(upload);
    document.querySelectorAll("[data-upload-many]").forEach(uploadMany);
    document.querySelectorAll("[data-ask-form]").forEach(function (form) {
      form.addEventListener("submit", function (event) {
        const button = event.submitter;
        if (!button || button.value !== "save") {
          form.querySelector("[data-live-flag]").value = "1";
        }
      });
    });
  });
})();
