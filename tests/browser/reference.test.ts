/**
 * The reference page (`/docs`) in a real headless browser (Debian's Chromium, installed by
 * ops/browser): on each gateway the page loads offline (every request stays on the gateway),
 * lists every operation of the gateway's OpenAPI document, and shows a response schema.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import puppeteer, { type Browser } from 'puppeteer-core';
import { call, startTestApp, type TestApp } from '../support/app';

type Doc = {
  paths: Record<
    string,
    Record<
      string,
      {
        tags?: string[];
        responses: Record<string, { content?: Record<string, { schema: { $ref?: string } }> }>;
      }
    >
  >;
  components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
};

let app: TestApp;
let browser: Browser;

beforeAll(async () => {
  const executablePath = execFileSync('bash', [join(__dirname, '..', '..', 'ops', 'browser')], {
    encoding: 'utf8',
  }).trim();
  app = await startTestApp('embedded');
  browser = await puppeteer.launch({
    executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
  });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await app?.stop();
});

/** The first operation whose success answer has a schema with named properties, and one of them. */
function operationWithSchema(doc: Doc): { method: string; path: string; property: string; tag: string } {
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      for (const [status, res] of Object.entries(op.responses)) {
        const ref = res.content?.['application/json']?.schema.$ref;
        if (!status.startsWith('2') || !ref) continue;
        const props = Object.keys(doc.components.schemas[ref.split('/').pop()!]?.properties ?? {});
        if (props.length > 0) return { method, path, property: props[0]!, tag: op.tags?.[0] ?? 'default' };
      }
    }
  }
  throw new Error('no operation documents a success schema with properties');
}

describe.each(['admin', 'query', 'ingest'] as const)('the %s gateway reference page', (gateway) => {
  it('loads offline, lists every operation and shows a response schema', async () => {
    const base = app.url[gateway];
    const doc = (await call('GET', `${base}/openapi.json`)).body as Doc;
    const expected = Object.entries(doc.paths)
      .flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`))
      .sort();
    const page = await browser.newPage();
    const elsewhere: string[] = [];
    const problems: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(`${base}/`) && !r.url().startsWith('data:')) elsewhere.push(r.url());
    });
    page.on('pageerror', (e) => problems.push(String(e)));
    page.on('requestfailed', (r) => problems.push(`${r.url()}: ${r.failure()?.errorText ?? 'failed'}`));
    try {
      await page.goto(`${base}/docs`, { waitUntil: 'load', timeout: 60_000 });
      // Functions that run in the page are given as source (this project's types have no DOM).
      // Tags start collapsed (http/reference.ts): open each in turn, read its operations, close it.
      await page.waitForFunction(`document.querySelectorAll('.opblock-tag').length > 0`, { timeout: 60_000 });
      const tags = await page.$$eval('.opblock-tag', (els) =>
        els.map((e) => e.getAttribute('data-tag') ?? ''),
      );
      const listed: string[] = [];
      for (const tag of tags) {
        const opener = `.opblock-tag[data-tag=${JSON.stringify(tag)}]`;
        await page.click(opener);
        await page.waitForFunction(`document.querySelectorAll('.opblock').length > 0`, { timeout: 60_000 });
        listed.push(
          ...(await page.$$eval('.opblock', (els) =>
            els.map(
              (e) =>
                `${(e.querySelector('.opblock-summary-method')?.textContent ?? '').trim()} ${e.querySelector('.opblock-summary-path')?.getAttribute('data-path') ?? ''}`,
            ),
          )),
        );
        await page.click(opener);
        await page.waitForFunction(`document.querySelectorAll('.opblock').length === 0`, { timeout: 60_000 });
      }
      expect(listed.sort()).toEqual(expected);

      // Open one operation and switch its success answer to the schema view.
      const target = operationWithSchema(doc);
      await page.click(`.opblock-tag[data-tag=${JSON.stringify(target.tag)}]`);
      const block = await page.waitForSelector(
        `.opblock-${target.method} .opblock-summary-path[data-path="${target.path}"]`,
      );
      await block!.click();
      await page.waitForSelector('.opblock.is-open .responses-table', { timeout: 30_000 });
      const tab = await page.waitForSelector('.opblock.is-open .responses-table button[data-name="model"]');
      await tab!.click();
      await page.waitForFunction(
        `[...document.querySelectorAll('.opblock.is-open .responses-table .model-box')]` +
          `.some((m) => (m.textContent || '').includes(${JSON.stringify(target.property)}))`,
        { timeout: 30_000 },
      );
      expect(problems).toEqual([]);
      expect(elsewhere).toEqual([]);
    } finally {
      await page.close();
    }
  }, 180_000);
});
