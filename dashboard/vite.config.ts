// Vite builds the dashboard into dist/ as ONE file, index.html, with its script and styles inline:
// Mosquitto's http_dir (2.0) serves files without a Content-Type, and browsers refuse a module
// script or a stylesheet without one, but sniff an HTML page. One file also works unchanged at
// the root of `armd dashboard`, or under any path prefix. Nothing is fetched from elsewhere.
import type { Plugin, Rollup } from "vite";
import { defineConfig } from "vitest/config";

/** Replace the page's <script src> and <link rel=stylesheet> by the chunk's code, inline. */
function inlineAssets(): Plugin {
  return {
    name: "armd-inline-assets",
    apply: "build",
    enforce: "post",
    generateBundle(_options: unknown, bundle: Rollup.OutputBundle) {
      const page = bundle["index.html"] as Rollup.OutputAsset;
      let html = String(page.source);
      for (const [file, output] of Object.entries(bundle)) {
        const escaped = file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
        if (output.type === "chunk") {
          // "</script" inside the code would end the element: "<\/script" means the same in JS.
          const code = output.code.replaceAll("</script", "<\\/script");
          const tag = new RegExp(`<script type="module"[^>]*src="[^"]*${escaped}"></script>`);
          html = html.replace(tag, () => `<script type="module">${code}</script>`);
        } else if (file.endsWith(".css")) {
          const tag = new RegExp(`<link rel="stylesheet"[^>]*href="[^"]*${escaped}">`);
          html = html.replace(tag, () => `<style>${String(output.source)}</style>`);
        } else {
          continue;
        }
        delete bundle[file];
      }
      page.source = html;
    },
  };
}

export default defineConfig({
  base: "./",
  plugins: [inlineAssets()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    // three.js and mqtt.js make one ~900 kB script (~250 kB gzipped), inlined in index.html.
    chunkSizeWarningLimit: 1200,
  },
  test: {
    include: ["test/**/*.test.ts"],
  },
});
