/**
 * The cabinet in a real browser (headless Chromium, driven by playwright-core): a
 * director signs in, creates a key, copies it with the copy button, the key works on
 * the public API, the counter moves, the back button does not bring the key back,
 * revoking (through its confirmation) makes the API answer 401; in Russian, a key with
 * options, its own page and chart, its allowlist, rolling it, the password change and
 * the language switch; and everything also works with JavaScript turned off.
 *
 * The browser comes from the npm registry (test/helpers/browser.ts): nothing to install.
 * Screenshots are written only when SCHOOL_DATA_SCREENSHOTS names a folder (the docs'
 * are made with SCHOOL_DATA_SCREENSHOTS=docs/images); each run's keys and dates differ.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { createKey, revokeKey } from '../../src/management/keys.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { launchBrowser } from '../helpers/browser.js';
import { seedDirector, startTestCabinet, type SeededDirector, type TestCabinet } from '../helpers/cabinet.js';
import { createTestStore, type TestStore } from '../helpers/store.js';

const KEY = /^service_pk_[0-9a-f]{32}$/;
const STUDENTS = '/api/public/v1/students';
/** Where the screenshots go; none are taken when unset. */
const screenshots = process.env.SCHOOL_DATA_SCREENSHOTS ? path.resolve(process.env.SCHOOL_DATA_SCREENSHOTS) : null;

describe('the cabinet in headless Chromium', () => {
  let store: TestStore;
  let t: TestCabinet;
  let api: TestApp;
  let browser: Browser;

  before(async () => {
    if (screenshots) fs.mkdirSync(screenshots, { recursive: true });
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
  });

  async function shoot(page: Page, name: string, fullPage = false): Promise<void> {
    if (screenshots) await page.screenshot({ path: path.join(screenshots, name), fullPage });
  }

  async function newPage(javaScriptEnabled = true, locale = 'en-US'): Promise<Page> {
    const context = await browser.newContext({ ignoreHTTPSErrors: true, javaScriptEnabled, viewport: { width: 1180, height: 760 }, locale });
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

  /**
   * Clicks a form's submit button and waits for the answer page's own load event, so its
   * deferred script (the copy button) has run. (waitForLoadState would see the page that
   * is still shown and return at once.)
   */
  async function submit(page: Page, button: string): Promise<void> {
    await Promise.all([page.waitForEvent('load'), page.click(button)]);
  }

  const row = (page: Page, name: string) => page.locator('#keys tbody tr', { hasText: name });

  /**
   * A VIP school's history for the screenshots: a key in use (six weeks of past days, and
   * `requests` real ones today) and a revoked one.
   */
  async function schoolWithHistory(used: string, revoked: string, requests: number) {
    const d = await seedDirector(store.db, 'VIP', 'Автошкола «Старт»');
    const site = await createKey(store.db, d.schoolId, used);
    const old = await createKey(store.db, d.schoolId, revoked);
    assert.ok(site.ok && old.ok);
    await pastDays(site.value.id);
    for (let i = 0; i < requests; i++) await api.request(`${STUDENTS}?limit=${i + 1}`, { key: site.value.key });
    await revokeKey(store.db, old.value.id, d.schoolId);
    return { d, site: site.value };
  }

  /** Six weeks of past requests per day for a key's chart (today's come from real requests). */
  async function pastDays(keyId: string): Promise<void> {
    const rows = Array.from({ length: 42 }, (_, i) => ({
      key_id: keyId,
      day: new Date(Date.now() - (i + 1) * 86_400_000).toISOString().slice(0, 10),
      requests: ((i * 37) % 11) * 30 + ((i + 2) % 7 < 5 ? 240 : 20),
    }));
    await store.db.insertInto('key_days').values(rows).execute();
    const total = rows.reduce((sum, r) => sum + r.requests, 0);
    await store.db.updateTable('api_keys').set({ request_count: total }).where('id', '=', keyId).execute();
  }

  /**
   * Reloads `page` until `selector` reads `text` (the usage flush, every few seconds, has
   * reached it). Bounded generously: on a loaded CI machine a flush can lag by seconds.
   */
  async function reloadUntil(page: Page, selector: string, text: string): Promise<void> {
    const now = async () => ((await page.locator(selector).count()) > 0 ? (await page.locator(selector).first().textContent())?.trim() : undefined);
    const deadline = Date.now() + 60_000;
    while ((await now()) !== text && Date.now() < deadline) {
      await page.waitForTimeout(200);
      await page.reload();
    }
    assert.equal(await now(), text, `${selector} after reloading`);
  }

  it('signs in, creates a key, copies it, uses it, sees the counter move, revokes it', async () => {
    const { d } = await schoolWithHistory('Website', 'Old BI export', 1);

    const page = await newPage();
    await signIn(page, d);
    assert.equal(await page.locator('html').getAttribute('lang'), 'en');
    assert.equal(await page.locator('#plan').textContent(), 'VIP');
    assert.match((await page.locator('#limit').textContent()) ?? '', /600 requests per minute/);

    await page.fill('#key-name', 'Accounting (1C)');
    await page.click('#create-key summary');
    await page.check('input[name=scope_students]');
    await page.check('input[name=scope_lessons]');
    await page.fill('#allow', '127.0.0.1, ::1');
    await shoot(page, 'cabinet-create-en.png', true);
    await submit(page, '#create-key button[type=submit]');
    const key = await page.inputValue('#new-key');
    assert.match(key, KEY);
    assert.match((await page.textContent('[role=alert]')) ?? '', /it will not be shown again/);
    await shoot(page, 'cabinet-new-key.png');

    const copy = page.locator('button[data-copy="new-key"]');
    assert.ok(await copy.isVisible(), 'copy button shown when JavaScript runs');
    // Every label the button shows is recorded: "Copied" returns to "Copy" after 4 s, which a
    // slow machine could otherwise miss. (Strings: the test is typed without the DOM library.)
    await page.evaluate(`{
      const b = document.querySelector('button[data-copy="new-key"]');
      window.labels = [];
      new MutationObserver(() => window.labels.push(b.textContent)).observe(b, { childList: true, characterData: true, subtree: true });
    }`);
    await copy.click();
    await page.waitForFunction(`window.labels.length > 0`);
    assert.equal(await page.evaluate<string>('window.labels[0]'), 'Copied');
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

    // Reload until the usage flush has reached the card.
    await page.goto(`${t.origin}/settings/api`);
    await reloadUntil(page, '#keys tbody tr:has-text("Accounting (1C)") td.num', '1');
    assert.doesNotMatch((await row(page, 'Accounting (1C)').locator('td').nth(3).textContent()) ?? '', /never/);
    await shoot(page, 'cabinet-keys-en.png', true);
    assert.match((await row(page, 'Accounting (1C)').textContent()) ?? '', /students, lessons · limited addresses/);

    // The used key's own page: its chart and its last request.
    await Promise.all([page.waitForURL(/\/settings\/api\/keys\/key_/), row(page, 'Website').locator('a', { hasText: 'Website' }).click()]);
    await reloadUntil(page, '#key-requests tbody tr:first-child td:nth-child(3)', '200');
    assert.match((await page.locator('#key-days figcaption').textContent()) ?? '', /requests in the last 90 days/);
    await shoot(page, 'cabinet-key-en.png', true);
    await page.goto(`${t.origin}/settings/api`);

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

  it('in Russian: creates a key with options, opens its page and chart, changes its addresses, rolls it, changes the password, switches language', async () => {
    const { d, site } = await schoolWithHistory('Сайт школы', 'Старая выгрузка для BI', 3);

    // The browser asks for Russian (Accept-Language: ru-RU): the sign-in page is Russian.
    const page = await newPage(true, 'ru-RU');
    await page.goto(`${t.origin}/login`);
    assert.equal(await page.locator('html').getAttribute('lang'), 'ru');
    assert.equal((await page.textContent('form[action="/login"] button[type=submit]'))?.trim(), 'Войти');
    await signIn(page, d);
    assert.equal(await page.textContent('h1'), 'Ключи API');
    assert.match((await page.locator('#limit').textContent()) ?? '', /600 запросов в минуту/);
    assert.match((await row(page, 'Старая выгрузка').textContent()) ?? '', /Отозван/);
    await shoot(page, 'cabinet-keys-ru.png', true);

    // Create with options: two resources, an expiry day, loopback addresses only.
    await page.fill('#key-name', 'Бухгалтерия (1С)');
    await page.click('#create-key summary');
    await page.check('input[name=scope_students]');
    await page.check('input[name=scope_payments]');
    const expiry = new Date(Date.now() + 60 * 86_400_000).toISOString().slice(0, 10);
    await page.fill('#expires', expiry);
    await page.fill('#allow', '127.0.0.1, ::1');
    await shoot(page, 'cabinet-create-ru.png', true);
    await submit(page, '#create-key button[type=submit]');
    const key = await page.inputValue('#new-key');
    assert.match(key, KEY);
    assert.match((await page.textContent('[role=alert]')) ?? '', /больше он показан не будет/);
    // Where the key is shown once, the switch opens a warning first; the key stays on the page.
    await page.click('#lang-en');
    assert.match((await page.textContent('.leave-box')) ?? '', /will not be shown again/);
    assert.equal(await page.inputValue('#new-key'), key);
    await page.click('#lang-en');
    assert.equal((await api.request(STUDENTS, { key })).status, 200);
    assert.equal((await api.request('/api/public/v1/lessons', { key })).status, 403, 'outside its resources');
    await page.click('text=назад к ключам API');
    await page.waitForURL(`${t.origin}/settings/api`);
    const created = row(page, 'Бухгалтерия (1С)');
    assert.match((await created.textContent()) ?? '', /ученики, платежи · только с разрешённых адресов · до \d\d\.\d\d\.\d{4}/);

    // The used key's own page: its options, its last requests and its chart.
    await Promise.all([page.waitForURL(/\/settings\/api\/keys\/key_/), row(page, 'Сайт школы').locator('a', { hasText: 'Сайт школы' }).click()]);
    await reloadUntil(page, '#key-requests tbody tr:nth-child(3) td:nth-child(3)', '200');
    assert.equal(await page.textContent('#key-expires'), 'бессрочно');
    assert.equal(await page.locator('#key-requests tbody tr').count(), 3);
    assert.equal(await page.locator('#key-days rect').count(), 90);
    assert.match((await page.locator('#key-days figcaption').textContent()) ?? '', /запрос.* за последние 90 дней/);
    await shoot(page, 'cabinet-key-ru.png', true);

    // Its addresses: a network the test is not in, then any address again.
    await page.fill('#allow', '203.0.113.0/24');
    await Promise.all([page.waitForURL(/\?saved=1$/), page.click('#change-allow button[type=submit]')]);
    assert.match((await page.textContent('.notice.success')) ?? '', /Адреса сохранены/);
    assert.equal(await page.textContent('#key-allow'), '203.0.113.0/24');
    assert.equal((await api.request(STUDENTS, { key: site.key })).status, 403);
    await page.fill('#allow', 'это не адрес');
    await submit(page, '#change-allow button[type=submit]');
    assert.match((await page.textContent('#allow-error')) ?? '', /«это не адрес» — не IPv4\/IPv6-адрес/);
    await page.fill('#allow', '');
    await Promise.all([page.waitForURL(/\?saved=1$/), page.click('#change-allow button[type=submit]')]);
    assert.equal(await page.textContent('#key-allow'), 'любой адрес');
    assert.equal((await api.request(STUDENTS, { key: site.key })).status, 200);

    // Roll it with an hour's overlap: the new key is shown once, both work for the hour.
    await page.selectOption('#overlap', '1h');
    await submit(page, '#roll-key button[type=submit]');
    const rolled = await page.inputValue('#new-key');
    assert.match(rolled, KEY);
    assert.notEqual(rolled, site.key);
    assert.equal((await api.request(STUDENTS, { key: rolled })).status, 200);
    assert.equal((await api.request(STUDENTS, { key: site.key })).status, 200);
    await page.goto(`${t.origin}/settings/api/keys/${site.id}`);
    assert.match((await page.textContent('#key-warning')) ?? '', /Этот ключ перестанет работать/);
    assert.match((await page.textContent('#key-events')) ?? '', /Перевыпущен/);

    // The password, from the top bar.
    await Promise.all([page.waitForURL(/\/settings\/password$/), page.click('header >> text=Пароль')]);
    await page.fill('#current', d.password);
    await page.fill('#next', 'новый пароль директора');
    await submit(page, '#change-password button[type=submit]');
    assert.match((await page.textContent('.notice.success')) ?? '', /Пароль изменён/);

    // The switch: English on this page and the next ones, then Russian again.
    await Promise.all([page.waitForURL(/\?lang=en$/), page.click('#lang-en')]);
    assert.equal(await page.locator('html').getAttribute('lang'), 'en');
    assert.equal(await page.textContent('h1'), 'Change your password');
    await page.goto(`${t.origin}/settings/api`);
    assert.equal(await page.textContent('h1'), 'API keys');
    await Promise.all([page.waitForURL(/\?lang=ru$/), page.click('#lang-ru')]);
    assert.equal(await page.textContent('h1'), 'Ключи API');
    await Promise.all([page.waitForURL(/\/login\?signed-out/), page.click('text=Выйти')]);
    assert.match((await page.textContent('.notice')) ?? '', /Вы вышли из кабинета/);
    await page.context().close();
  });

  it('works with JavaScript off: the key is plain text and the copy button stays hidden', async () => {
    const d = await seedDirector(store.db, 'Profi');
    const page = await newPage(false);
    await signIn(page, d);
    await page.fill('#key-name', 'No-JS key');
    await submit(page, '#create-key button[type=submit]');
    const key = await page.inputValue('#new-key');
    assert.match(key, KEY);
    assert.equal(await page.locator('button[data-copy="new-key"]').isVisible(), false);
    assert.equal((await api.request(STUDENTS, { key })).status, 200);
    await page.context().close();
  });
});
