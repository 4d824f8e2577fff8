/**
 * The reference page of a gateway (`/docs`): Swagger UI (the swagger-ui-dist package, served from
 * this process, no CDN) rendering the gateway's `/openapi.json`: navigation by tag, every operation
 * with its parameters, request and response schemas, examples and security. Operations open on a
 * click ('full' expansion of ~120 operations is too heavy for a browser tab).
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type Router from '@koa/router';
import type { GatewayState } from './types';

const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'application/javascript; charset=utf-8',
};

// The page's own script: a file, so the page needs no inline script. Tags start collapsed: with
// every tag open at once, Swagger UI (5.x) stopped rendering the admin document (204 operations)
// after its sixth operation, with no error; one tag at a time renders every operation.
const INIT = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: '/openapi.json',
    dom_id: '#reference',
    docExpansion: 'none',
    defaultModelsExpandDepth: 1,
    defaultModelExpandDepth: 3,
    deepLinking: true,
    validatorUrl: null,
    tryItOutEnabled: false,
  });
});
`;

function page(title: string): string {
  const esc = title.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc}</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<noscript>This reference needs JavaScript; the document itself is at <a href="/openapi.json">/openapi.json</a>.</noscript>
<div id="reference"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/init.js"></script>
</body>
</html>
`;
}

/** Mounts `/docs` and its assets (read once, on first use). */
export function mountReference(router: Router<GatewayState>, title: string): void {
  const dir = dirname(require.resolve('swagger-ui-dist/package.json'));
  const cache = new Map<string, Buffer>();
  const html = page(title);
  router.get('/docs', (ctx) => {
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = html;
  });
  router.get('/docs/assets/:file', (ctx) => {
    const file = ctx.params.file!;
    if (file === 'init.js') {
      ctx.type = 'application/javascript; charset=utf-8';
      ctx.body = INIT;
      return;
    }
    const type = ASSETS[file];
    if (!type) return; // 404 from the router's fallthrough
    let body = cache.get(file);
    if (!body) cache.set(file, (body = readFileSync(join(dir, file))));
    ctx.type = type;
    ctx.set('Cache-Control', 'public, max-age=86400');
    ctx.body = body;
  });
}
