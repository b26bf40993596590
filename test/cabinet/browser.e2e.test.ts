/**
 * The cabinet in a real browser (headless Chromium, driven by playwright-core): a
 * director signs in, creates a key, copies it with the copy button, the key works on
 * the public API, the counter moves, the back button does not bring the key back,
 * revoking (through its confirmation) makes the API answer 401; and everything also
 * works with JavaScript turned off.
 *
 * The browser comes from the npm registry (test/helpers/browser.ts): nothing to install.
 * Screenshots go to docs/images/ with SCHOOL_DATA_UPDATE_SCREENSHOTS=1, else to a
 * temporary directory (each run's key and dates differ, so the committed ones are
 * refreshed on purpose, not by every test run).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { createKey, revokeKey } from '../../src/management/keys.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { launchBrowser } from '../helpers/browser.js';
import { seedDirector, startTestCabinet, type SeededDirector, type TestCabinet } from '../helpers/cabinet.js';
import { createTestStore, type TestStore } from '../helpers/store.js';

const KEY = /^service_pk_[0-9a-f]{32}$/;
const STUDENTS = '/api/public/v1/students';
const updateScreenshots = process.env.SCHOOL_DATA_UPDATE_SCREENSHOTS === '1';

describe('the cabinet in headless Chromium', () => {
  let store: TestStore;
  let t: TestCabinet;
  let api: TestApp;
  let browser: Browser;
  let screenshots: string;

  before(async () => {
    screenshots = updateScreenshots
      ? path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../docs/images')
      : fs.mkdtempSync(path.join(os.tmpdir(), 'school-data-screens-'));
    store = await createTestStore();
    t = await startTestCabinet({ store });
    api = await startTestApp({ store });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await t?.close();
    await api?.close();
    await store?.close();
    if (screenshots && !updateScreenshots) fs.rmSync(screenshots, { recursive: true, force: true });
  });

  async function newPage(javaScriptEnabled = true): Promise<Page> {
    const context = await browser.newContext({ ignoreHTTPSErrors: true, javaScriptEnabled, viewport: { width: 1180, height: 760 }, locale: 'en-US' });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: t.origin });
    return context.newPage();
  }

  async function signIn(page: Page, d: SeededDirector): Promise<void> {
    await page.goto(`${t.origin}/login`);
    await page.fill('#email', d.email);
    await page.fill('#password', d.password);
    await Promise.all([page.waitForURL(`${t.origin}/settings/api`), page.click('form[action="/login"] button[type=submit]')]);
  }

  /** The page's markup once it stops navigating (an error page after going back to a form's answer, say). */
  async function settledContent(page: Page): Promise<string> {
    for (let i = 0; ; i++) {
      try {
        await page.waitForLoadState('load');
        return await page.content();
      } catch (err) {
        if (i === 50) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  const row = (page: Page, name: string) => page.locator('#keys tbody tr', { hasText: name });

  it('signs in, creates a key, copies it, uses it, sees the counter move, revokes it', async () => {
    const d = await seedDirector(store.db, 'VIP', 'Автошкола «Старт»');
    // A history for the screenshot: a key in use and a revoked one.
    const site = await createKey(store.db, d.schoolId, 'Website');
    const old = await createKey(store.db, d.schoolId, 'Old BI export');
    assert.ok(site.ok && old.ok);
    await api.request(STUDENTS, { key: site.value.key });
    await revokeKey(store.db, old.value.id, d.schoolId);

    const page = await newPage();
    await signIn(page, d);
    assert.equal(await page.locator('#plan').textContent(), 'VIP');
    assert.match((await page.locator('#limit').textContent()) ?? '', /600 requests per minute/);

    await page.fill('#key-name', 'Accounting (1C)');
    await Promise.all([page.waitForLoadState('load'), page.click('#create-key button[type=submit]')]);
    const key = await page.inputValue('#new-key');
    assert.match(key, KEY);
    assert.match((await page.textContent('[role=alert]')) ?? '', /it will not be shown again/);
    await page.screenshot({ path: path.join(screenshots, 'cabinet-new-key.png') });

    const copy = page.locator('button[data-copy="new-key"]');
    assert.ok(await copy.isVisible(), 'copy button shown when JavaScript runs');
    await copy.click();
    await copy.filter({ hasText: 'Copied' }).waitFor();
    // Evaluated in the page (a string: the test itself is typed without the DOM library).
    const copied = await page.evaluate<string>('navigator.clipboard.readText()');
    assert.equal(copied, key);

    assert.equal((await api.request(STUDENTS, { key: copied })).status, 200);

    await page.click('text=back to API keys');
    await page.waitForURL(`${t.origin}/settings/api`);
    assert.ok(!(await page.content()).includes(key), 'key on the list page');
    // The back button does not bring the key back: the page was the answer to a form and is never stored.
    // (Chromium answers with its "Confirm Form Resubmission" page, ERR_CACHE_MISS.)
    await page.goBack().catch(() => null);
    assert.ok(!(await settledContent(page)).includes(key), 'key shown again after going back');

    // Reload until the usage flush has reached the card (bounded, not timed).
    await page.goto(`${t.origin}/settings/api`);
    for (let i = 0; i < 50 && (await row(page, 'Accounting (1C)').locator('td.num').textContent()) !== '1'; i++) {
      await page.waitForTimeout(100);
      await page.reload();
    }
    assert.equal(await row(page, 'Accounting (1C)').locator('td.num').textContent(), '1');
    assert.doesNotMatch((await row(page, 'Accounting (1C)').locator('td').nth(3).textContent()) ?? '', /never/);
    await page.screenshot({ path: path.join(screenshots, 'cabinet-keys.png'), fullPage: true });

    await Promise.all([page.waitForURL(/\/revoke$/), row(page, 'Accounting (1C)').locator('text=Revoke').click()]);
    assert.match((await page.textContent('h1')) ?? '', /Revoke the key “Accounting \(1C\)”\?/);
    assert.equal((await api.request(STUDENTS, { key })).status, 200, 'the confirmation page alone revokes nothing');
    await Promise.all([page.waitForURL(/\/settings\/api\?revoked=/), page.click('button:has-text("Revoke key")')]);
    assert.match((await page.textContent('.notice.success')) ?? '', /is revoked/);
    assert.match((await row(page, 'Accounting (1C)').textContent()) ?? '', /Revoked/);
    assert.equal((await api.request(STUDENTS, { key })).status, 401);

    await Promise.all([page.waitForURL(/\/login\?signed-out/), page.click('text=Sign out')]);
    await page.goto(`${t.origin}/settings/api`);
    assert.equal(new URL(page.url()).pathname, '/login');
    await page.context().close();
  });

  it('works with JavaScript off: the key is plain text and the copy button stays hidden', async () => {
    const d = await seedDirector(store.db, 'Profi');
    const page = await newPage(false);
    await signIn(page, d);
    await page.fill('#key-name', 'No-JS key');
    await Promise.all([page.waitForLoadState('load'), page.click('#create-key button[type=submit]')]);
    const key = await page.inputValue('#new-key');
    assert.match(key, KEY);
    assert.equal(await page.locator('button[data-copy="new-key"]').isVisible(), false);
    assert.equal((await api.request(STUDENTS, { key })).status, 200);
    await page.context().close();
  });
});
