// Vite builds the dashboard into dist/: one HTML page, one script, one stylesheet, no CDN.
// `base: "./"` makes every URL relative, so the same build works at the root of
// `armd dashboard`, of Mosquitto's http_dir, or under any path prefix.
import { defineConfig } from "vitest/config";

export default defineConfig({
  base: "./",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    // three.js alone is ~500 kB minified (~130 kB gzipped): one chunk is simplest to serve.
    chunkSizeWarningLimit: 1200,
  },
  test: {
    include: ["test/**/*.test.ts"],
  },
});
