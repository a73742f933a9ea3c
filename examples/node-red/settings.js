/**
 * Node-RED settings for the armd example flow (flow.json), used by its README's commands and by
 * tests/system/test_node_red.py:
 *
 *   node-red --settings settings.js --userDir ~/.node-red-armd --port 1880 flow.json
 *
 * Node-RED's defaults with these differences:
 * - the editor and its admin API listen on 127.0.0.1 only: without adminAuth (below) anyone who
 *   reaches the port could edit the flow and send goals to the arm;
 * - nothing is fetched from the internet: no telemetry, update check or palette installs;
 * - the broker's credentials are not encrypted with a generated key kept in the userDir: give
 *   the password as an environment variable instead (`${ARMD_MQTT_PASSWORD}` in the broker
 *   node's Security tab, README.md), so that no file holds it.
 */
module.exports = {
    uiHost: "127.0.0.1",
    flowFilePretty: true,
    credentialSecret: false,
    telemetry: { enabled: false, updateNotification: false },
    diagnostics: { enabled: false, ui: false },
    externalModules: {
        autoInstall: false,
        palette: { allowInstall: false, allowUpload: false },
        modules: { allowInstall: false },
    },
    editorTheme: { tours: false, projects: { enabled: false } },
    logging: { console: { level: "info", metrics: false, audit: false } },
    // To protect the editor with a login (then the admin API needs a token too):
    // adminAuth: { type: "credentials", users: [{ username: "admin",
    //     password: "<node-red admin hash-pw>", permissions: "*" }] },
};
