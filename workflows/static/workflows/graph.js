/* Draws workflow graphs as SVG. The layout is dagre's (vendored in vendor/dagre); this file
 * only sizes the nodes, hands them to dagre and draws what it placed.
 *
 * Each `[data-graph]` element names a JSON script made by workflows.graph: nodes
 * {id, name, kind, parent, status?, runs?, items?, url?, entry?, exits?} and edges
 * {source, target, route}. A node of kind "workflow" is a cluster holding its children; an
 * edge into or out of it is drawn to its START and from its terminal nodes (dagre lays out
 * no edges ending on a cluster). Runs without a node of their own (parallel-worker items,
 * dynamic children) are drawn as small squares inside their node.
 */
(function () {
  "use strict";

  const SVG_NS = "http://www.w3.org/2000/svg";
  const CHAR_WIDTH = 7.4;
  const NODE_HEIGHT = 34;
  const PADDING = 14;
  const ITEM = 12;
  const ITEM_GAP = 4;
  const ITEMS_PER_ROW = 12;
  const START_SIZE = 18;

  function svg(name, attributes, parent) {
    const element = document.createElementNS(SVG_NS, name);
    for (const [key, value] of Object.entries(attributes || {})) {
      element.setAttribute(key, value);
    }
    if (parent) parent.appendChild(element);
    return element;
  }

  // A node of a definition has no status at all; a node of an invocation that never ran
  // has status null ("none": drawn dashed).
  function statusClass(status) {
    return status === undefined ? "hitl-plain" : "hitl-status-" + (status || "none");
  }

  function label(node) {
    let text = node.name;
    if (node.kind === "parallel_worker") text += " (each item)";
    if (node.runs > 1) text += " ×" + node.runs;
    return text;
  }

  function size(node) {
    if (node.kind === "start") return { width: START_SIZE, height: START_SIZE };
    const items = (node.items || []).length;
    let width = Math.max(96, label(node).length * CHAR_WIDTH + 2 * PADDING);
    let height = NODE_HEIGHT;
    if (items) {
      const columns = Math.min(items, ITEMS_PER_ROW);
      const rows = Math.ceil(items / ITEMS_PER_ROW);
      width = Math.max(width, columns * (ITEM + ITEM_GAP) - ITEM_GAP + 2 * PADDING);
      height += rows * (ITEM + ITEM_GAP) + 4;
    }
    return { width, height };
  }

  function tooltip(parent, node) {
    const parts = [node.id.split("/").slice(1).join("/"), node.kind];
    if (node.status !== undefined) parts.push(node.status || "not run");
    if (node.runs > 1) parts.push(node.runs + " runs");
    if (node.superseded) parts.push(node.superseded + " superseded by a changed answer");
    if (node.url) parts.push("click to answer");
    svg("title", {}, parent).textContent = parts.join(" · ");
  }

  function layout(data) {
    const graph = new dagre.graphlib.Graph({ compound: true, multigraph: true });
    graph.setGraph({ rankdir: "LR", nodesep: 40, ranksep: 44, marginx: 12, marginy: 28 });
    graph.setDefaultEdgeLabel(() => ({}));
    const byId = new Map(data.nodes.map((node) => [node.id, node]));
    for (const node of data.nodes) {
      graph.setNode(node.id, node.kind === "workflow" ? {} : size(node));
    }
    for (const node of data.nodes) {
      if (node.parent) graph.setParent(node.id, node.parent);
    }
    // Edges touching a cluster go through its START (in) and its terminal nodes (out).
    const ends = (id, side) => {
      const node = byId.get(id);
      if (!node || node.kind !== "workflow") return [id];
      const inner = side === "in" ? [node.entry] : node.exits;
      return inner.flatMap((innerId) => ends(innerId, side));
    };
    data.edges.forEach((edge, index) => {
      const value = edge.route
        ? { label: edge.route, width: edge.route.length * CHAR_WIDTH, height: 14, labelpos: "c" }
        : {};
      for (const source of ends(edge.source, "out")) {
        for (const target of ends(edge.target, "in")) {
          graph.setEdge(source, target, { ...value, route: edge.route }, "e" + index);
        }
      }
    });
    dagre.layout(graph);
    return { graph, byId };
  }

  function drawCluster(layer, node, box) {
    const group = svg("g", { class: "hitl-cluster " + statusClass(node.status) }, layer);
    group.dataset.nodeId = node.id;
    if (node.status !== undefined) group.dataset.status = node.status || "";
    svg("rect", {
      class: "hitl-shape",
      x: box.x - box.width / 2,
      y: box.y - box.height / 2,
      width: box.width,
      height: box.height,
      rx: 8,
    }, group);
    const text = svg("text", {
      class: "hitl-cluster-label",
      x: box.x - box.width / 2 + 6,
      y: box.y - box.height / 2 - 6,
    }, group);
    text.textContent = "workflow " + node.name;
    tooltip(group, node);
  }

  function drawItems(group, node, box) {
    const left = box.x - box.width / 2 + PADDING;
    const top = box.y - box.height / 2 + NODE_HEIGHT - 4;
    const columns = Math.min(node.items.length, ITEMS_PER_ROW);
    const rows = Math.ceil(node.items.length / ITEMS_PER_ROW);
    // A light tray, so items stand out from their node's own status colour.
    svg("rect", {
      class: "hitl-tray",
      x: left - 3,
      y: top - 3,
      width: columns * (ITEM + ITEM_GAP) - ITEM_GAP + 6,
      height: rows * (ITEM + ITEM_GAP) - ITEM_GAP + 6,
      rx: 3,
    }, group);
    node.items.forEach((item, index) => {
      const holder = item.url ? svg("a", { href: item.url }, group) : group;
      const square = svg("rect", {
        class: "hitl-item " + statusClass(item.status),
        x: left + (index % ITEMS_PER_ROW) * (ITEM + ITEM_GAP),
        y: top + Math.floor(index / ITEMS_PER_ROW) * (ITEM + ITEM_GAP),
        width: ITEM,
        height: ITEM,
        rx: 2,
      }, holder);
      square.dataset.status = item.status || "";
      svg("title", {}, square).textContent =
        item.label + " · " + item.status + (item.url ? " · click to answer" : "");
    });
  }

  function drawNode(layer, node, box) {
    const holder = node.url ? svg("a", { href: node.url, class: "hitl-link" }, layer) : layer;
    const group = svg("g", {
      class: "hitl-node hitl-kind-" + node.kind + " " + statusClass(node.status),
    }, holder);
    group.dataset.nodeId = node.id;
    if (node.status !== undefined) group.dataset.status = node.status || "";
    tooltip(group, node);
    if (node.kind === "start") {
      svg("circle", { class: "hitl-shape", cx: box.x, cy: box.y, r: START_SIZE / 2 }, group);
      return;
    }
    const x = box.x - box.width / 2;
    const y = box.y - box.height / 2;
    if (node.kind === "parallel_worker") {
      // A stack of cards: the node maps over items.
      svg("rect", {
        class: "hitl-shape hitl-stack", x: x + 4, y: y - 4,
        width: box.width, height: box.height, rx: 6,
      }, group);
    }
    svg("rect", {
      class: "hitl-shape", x, y, width: box.width, height: box.height,
      rx: node.kind === "join" ? box.height / 2 : 6,
    }, group);
    const text = svg("text", {
      class: "hitl-label", x: box.x, y: y + NODE_HEIGHT / 2, "dominant-baseline": "central",
    }, group);
    text.textContent = label(node);
    if ((node.items || []).length) drawItems(group, node, box);
  }

  function drawEdge(layer, edge, arrow) {
    const points = edge.points || [];
    if (!points.length) return;
    const d = points.map((p, i) => (i ? "L" : "M") + p.x.toFixed(1) + " " + p.y.toFixed(1));
    const group = svg("g", { class: "hitl-edge" + (edge.route ? " hitl-routed" : "") }, layer);
    svg("path", { d: d.join(" "), "marker-end": `url(#${arrow})` }, group);
    if (edge.route) {
      const text = svg("text", { class: "hitl-route", x: edge.x, y: edge.y }, group);
      text.textContent = edge.route;
    }
  }

  function draw(container, data) {
    const { graph, byId } = layout(data);
    const arrow = "hitl-arrow-" + container.dataset.graph;
    const bounds = graph.graph();
    const picture = svg("svg", {
      class: "hitl-graph-svg",
      viewBox: `0 0 ${Math.ceil(bounds.width)} ${Math.ceil(bounds.height)}`,
      width: Math.ceil(bounds.width),
      height: Math.ceil(bounds.height),
      "data-workflow": data.name,
    });
    const marker = svg("marker", {
      id: arrow, viewBox: "0 0 10 10", refX: 9, refY: 5,
      markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse",
    }, svg("defs", {}, picture));
    svg("path", { d: "M0 0 L10 5 L0 10 z", class: "hitl-arrowhead" }, marker);
    const clusters = svg("g", { class: "hitl-clusters" }, picture);
    const edges = svg("g", { class: "hitl-edges" }, picture);
    const nodes = svg("g", { class: "hitl-nodes" }, picture);
    // Outer clusters first, so inner ones are drawn on top of them.
    const depth = (node) => (node.parent ? 1 + depth(byId.get(node.parent)) : 0);
    const ordered = [...data.nodes].sort((a, b) => depth(a) - depth(b));
    for (const node of ordered) {
      const box = graph.node(node.id);
      if (node.kind === "workflow") drawCluster(clusters, node, box);
      else drawNode(nodes, node, box);
    }
    for (const key of graph.edges()) drawEdge(edges, graph.edge(key), arrow);
    container.replaceChildren(picture);
    container.dataset.rendered = "true";
  }

  function drawAll() {
    for (const container of document.querySelectorAll("[data-graph]")) {
      const source = document.getElementById(container.dataset.graph);
      if (!source) continue;
      try {
        draw(container, JSON.parse(source.textContent));
      } catch (error) {
        container.textContent = "The graph could not be drawn: " + error;
        container.dataset.rendered = "error";
      }
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
  document.addEventListener("hitl:monitor-updated", drawAll); // live.js swapped the page
})();
