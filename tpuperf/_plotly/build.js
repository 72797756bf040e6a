// Builds plotly-tpuperf.min.js, the Plotly the HTML report inlines: plotly.js's core (which
// holds the scatter trace) with only the other trace types the report draws, bar and icicle,
// so that a page is about 1.3 MB instead of 4.8 MB with the full bundle (maps, 3-D, WebGL).
//
//   cd tpuperf/_plotly && npm install --no-save && node build.js
//
// A trace type the report starts to draw must be added here (tests/test_report_html.py
// checks that every type in a page is registered).
'use strict';
const path = require('path');

require('esbuild')
  .build({
    stdin: {
      contents:
        "var Plotly = require('plotly.js/lib/core');\n" +
        "Plotly.register([require('plotly.js/lib/bar'), require('plotly.js/lib/icicle')]);\n" +
        'module.exports = Plotly;\n',
      resolveDir: __dirname,
    },
    outfile: path.join(__dirname, 'plotly-tpuperf.min.js'),
    format: 'iife',
    globalName: 'Plotly',
    bundle: true,
    minify: true,
    // plotly.js's own build settings (its esbuild-config.js); maplibre's stylesheet, which
    // only map traces use, is left out.
    define: { global: 'window', 'define.amd': 'false' },
    alias: { stream: 'stream-browserify' },
    loader: { '.css': 'empty' },
    target: 'es2016',
    legalComments: 'none',
    banner: { js: `/* plotly.js ${require('plotly.js/package.json').version} (MIT, see LICENSE): core, bar, icicle */` },
    logLevel: 'info',
  })
  .catch(() => process.exit(1));
