// What a user sees in the Node-RED editor, as JSON lines on stdout: node statuses (the text under
// each node) and debug messages, read from the editor's comms WebSocket like the editor does.
// Used by tests/system/test_node_red.py:  node node_red_comms.js NODE_MODULES_DIR WS_URL
"use strict";
const path = require("path");
const [modules, url] = process.argv.slice(2);
const WebSocket = require(path.join(modules, "ws")); // Node-RED's own dependency

const socket = new WebSocket(url);
socket.on("open", () => {
    for (const topic of ["status/#", "debug"]) {
        socket.send(JSON.stringify({ subscribe: topic }));
    }
    process.stdout.write(JSON.stringify({ topic: "open" }) + "\n");
});
socket.on("message", (data) => {
    for (const event of JSON.parse(data)) {
        process.stdout.write(JSON.stringify(event) + "\n");
    }
});
socket.on("close", () => process.exit(0));
socket.on("error", (error) => {
    process.stderr.write(`${error}\n`);
    process.exit(1);
});
