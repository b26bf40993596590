/**
 * The cabinet in Russian and English: the language negotiated from Accept-Language by
 * q-value, the switch (`?lang=`, kept in a cookie) on every page, and each page rendered
 * in both languages with no English left on the Russian ones: its visible words, titles,
 * labels, messages, dates and counts, and `<html lang>`. On both stores.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { preferredLang } from '../../src/cabinet/i18n/index.js';
import { createKey, revokeKey } from '../../src/management/keys.js';
import { formFields, seedDirector, startTestCabinet, unescapeHtml, type Page, type TestCabinet } from '../helpers/cabinet.js';

describe('choosing the language from Accept-Language', () => {
  const cases: [string | undefined, 'en' | 'ru' | null][] = [
    ['ru', 'ru'],
    ['ru-RU', 'ru'],
    ['RU-ru', 'ru'],
    ['en', 'en'],
    ['en-GB', 'en'],
    ['en;q=0.9, ru;q=0.8', 'en'],
    ['ru-RU,ru;q=0.9,en-US;q=0.8,en;q=0.7', 'ru'],
    ['en-US,en;q=0.9,ru;q=0.8', 'en'],
    ['de-DE, en;q=0.3, ru;q=0.5', 'ru'],
    ['ru;q=0, en;q=0.1', 'en'],
    ['de, fr;q=0.9', null],
    ['*', 'en'],
    ['!!##, ;;q=zz, \u0000', null],
    ['ru'.padEnd(2000, ' '), null],
    ['', null],
    [undefined, null],
  ];
  for (const [header, lang] of cases) {
    it(`${JSON.stringify(header)?.slice(0, 40) ?? 'no header'} -> ${lang ?? 'neither'}`, () => {
      assert.equal(preferredLang(header), lang);
    });
  }
});

/** Latin words a Russian page may show: names of products, protocols and languages. */
const LATIN_ALLOWED = new Set(['school', 'data', 'API', 'Profi', 'VIP', 'Free', 'Standart', 'IPv', 'CIDR', 'UTC', 'Ctrl', 'HTML', 'cookie', 'English', 'Europe', 'Moscow']);

/**
 * The words of a page a reader sees or hears (text, title, aria-label, alt, option
 * texts; not code samples, emails, or ids), that are Latin and not allowed above. What
 * is marked as English on purpose (the switch's own offer, `<details lang="en">`) is
 * not a leftover.
 */
function englishLeftovers(html: string): string[] {
  const text = unescapeHtml(
    html
      .replace(/<code[^>]*>[\s\S]*?<\/code>/g, ' ')
      .replace(/<details[^>]*\blang="en"[^>]*>[\s\S]*?<\/details>/g, ' ')
      .replace(/<(script|style)[^>]*>[\s\S]*?<\/\1>/g, ' ')
      .replace(/<[^>]*?\baria-label="([^"]*)"[^>]*>/g, ' $1 ')
      .replace(/<[^>]+>/g, ' '),
  ).replace(/[\w.+-]+@[\w.-]+/g, ' ');
  return [...new Set(text.match(/[A-Za-z]{2,}/g) ?? [])].filter((w) => !LATIN_ALLOWED.has(w));
}

function assertRussian(page: Page, what: string): void {
  assert.match(page.text, /<html lang="ru">/, `${what}: <html lang>`);
  assert.deepEqual(englishLeftovers(page.text), [], `${what}: English words on the Russian page`);
}

/** Words of the Russian catalogue that an English page must not show (its data may be Russian). */
const RUSSIAN_UI = /Ключи API|Создать|Отозва|Войти|Выйти|Пароль|Срок действия|запрос|Ошибка|Назад|Настройки|никогда|Тариф|Действует|Вернуться/;

function assertEnglish(page: Page, what: string): void {
  assert.match(page.text, /<html lang="en">/, `${what}: <html lang>`);
  assert.doesNotMatch(page.text, RUSSIAN_UI, `${what}: Russian words on the English page`);
}

describe('the cabinet in Russian and English', () => {
  let t: TestCabinet;

  before(async () => {
    t = await startTestCabinet();
  });
  after(async () => {
    await t.close();
  });

  it('speaks Russian to a browser that prefers it, English to any other, and the sign-in page says so', async () => {
    const b = t.browser();
    const ru = await b.get('/login', { 'accept-language': 'ru-RU,ru;q=0.9,en;q=0.8' });
    assertRussian(ru, 'sign-in');
    assert.match(ru.text, /<title>Вход · кабинет school-data<\/title>/);
    assert.match(ru.text, /<button type="submit">Войти<\/button>/);
    assert.match(ru.text, /<a href="\/login\?lang=en" lang="en" hreflang="en" id="lang-en">English<\/a>/);
    for (const header of [undefined, 'en-US,en;q=0.9,ru;q=0.8', 'de-DE', '%%%garbage%%%']) {
      const en = await t.browser().get('/login', header === undefined ? {} : { 'accept-language': header });
      assertEnglish(en, `sign-in for ${header ?? 'no header'}`);
      assert.match(en.text, /<a href="\/login\?lang=ru" lang="ru" hreflang="ru" id="lang-ru">Русский<\/a>/);
    }
  });

  it('switches with ?lang=, keeps the choice in a cookie over the browser\'s preference, and switches back', async () => {
    const b = t.browser();
    const english = { 'accept-language': 'en' };
    const switched = await b.get('/login?lang=ru', english);
    assertRussian(switched, 'switched sign-in');
    const cookie = ([] as string[]).concat(switched.headers['set-cookie'] ?? []).find((c) => c.startsWith('__Host-sd_lang='));
    assert.ok(cookie, 'language cookie set');
    assert.match(cookie, /^__Host-sd_lang=ru; Max-Age=31536000; Path=\/; HttpOnly; Secure; SameSite=Lax$/);
    assertRussian(await b.get('/login', english), 'sign-in after the switch');
    // Signing in keeps it: every page after is Russian.
    const d = await seedDirector(t.store.db);
    const signedIn = await b.submit('/login', '/login', { email: d.email, password: d.password }, { headers: english });
    assert.equal(signedIn.status, 303);
    assertRussian(await b.get('/settings/api', english), 'keys after signing in');
    const back = await b.get('/settings/api?lang=en', { 'accept-language': 'ru' });
    assertEnglish(back, 'switched back');
    assertEnglish(await b.get('/settings/api', { 'accept-language': 'ru' }), 'kept English');
  });

  it('ignores an unknown ?lang= or cookie value: not reflected, nothing set, no redirect anywhere', async () => {
    const b = t.browser();
    for (const lang of ['de', '<script>alert(1)</script>', 'ru"><x', '//evil.example', 'RU']) {
      const page = await b.get(`/login?lang=${encodeURIComponent(lang)}`, { 'accept-language': 'en' });
      assert.equal(page.status, 200);
      assertEnglish(page, `?lang=${lang}`);
      assert.ok(!page.text.includes(lang.slice(0, 8)) || lang === 'de' || lang === 'RU', `${lang} reflected`);
      assert.ok(!([] as string[]).concat(page.headers['set-cookie'] ?? []).some((c) => c.startsWith('__Host-sd_lang=')), 'no cookie');
    }
    b.cookies.set('__Host-sd_lang', 'xx');
    assertRussian(await b.get('/login', { 'accept-language': 'ru' }), 'bad cookie: the header decides');
    // The switch's links name the page's own address, whatever the request's path was.
    const odd = await t.browser().get('//evil.example/?lang=ru');
    assert.equal(odd.status, 404);
    assert.match(odd.text, /href="\/login\?lang=en"/);
    assert.ok(!odd.text.includes('evil.example'));
  });

  it('renders every page of a signed-in director in Russian, messages and errors included, and each in English', async () => {
    const d = await seedDirector(t.store.db, 'VIP', 'Автошкола «Старт»');
    const used = await createKey(t.store.db, d.schoolId, 'Сайт', { allow: ['203.0.113.0/24'], scopes: ['students', 'lessons'] });
    const gone = await createKey(t.store.db, d.schoolId, 'Старая выгрузка');
    assert.ok(used.ok && gone.ok);
    await revokeKey(t.store.db, gone.value.id, d.schoolId);
    const ruB = t.browser();
    const enB = t.browser();
    assert.equal((await ruB.login(d.email, d.password)).status, 303);
    assert.equal((await enB.login(d.email, d.password)).status, 303);
    await ruB.get('/settings/api?lang=ru');
    await enB.get('/settings/api?lang=en');
    const keyPath = `/settings/api/keys/${used.value.id}`;

    for (const path of ['/settings/api', keyPath, `${keyPath}/revoke`, `/settings/api/keys/${gone.value.id}/revoke`, '/settings/password', '/settings/api/keys/key_0000000000000000']) {
      assertRussian(await ruB.get(path), path);
      const english = await enB.get(path);
      assertEnglish(english, path);
      assert.ok(englishLeftovers(english.text).length > 5, `${path}: the check of Latin words finds the English page's`);
    }
    const list = await ruB.get('/settings/api');
    assert.match(list.text, /<h1>Ключи API<\/h1>/);
    assert.match(list.text, /<dd id="plan">VIP<\/dd>/);
    assert.match(list.text, /600 запросов в минуту/);
    assert.match(list.text, /Отозвать<\/a>/);
    assert.match(list.text, /ученики, занятия · только с разрешённых адресов/);
    assert.match(list.text, /<td class="nowrap">\d\d\.\d\d\.\d{4}, \d\d:\d\d<\/td>/, 'dates the Russian way');
    const page = await ruB.get(keyPath);
    assert.match(page.text, /<h1>Ключ «Сайт»/);
    assert.match(page.text, /<dt>Срок действия<\/dt><dd id="key-expires">бессрочно<\/dd>/);
    assert.match(page.text, /<dt>Разрешённые адреса<\/dt>/);
    assert.match(page.text, /aria-label="Запросы по дням: 0 запросов за 90 дней"/);

    // Messages after a form: a refused one, a saved one, the new key, a revoke's notice, a form error page.
    const refused = await ruB.submit(keyPath, `${keyPath}/allow`, { allow: '10.0.0.0/40' });
    assert.equal(refused.status, 400);
    assertRussian(refused, 'refused allowlist');
    assert.match(refused.text, /«10\.0\.0\.0\/40» — не IPv4\/IPv6-адрес и не CIDR-диапазон\./);
    const saved = await ruB.submit(keyPath, `${keyPath}/allow`, { allow: '203.0.113.7' });
    assert.equal(saved.status, 303);
    assertRussian(await ruB.get(saved.location!), 'saved allowlist');
    const badName = await ruB.submit('/settings/api', '/settings/api/keys', { name: ' ' });
    assert.equal(badName.status, 400);
    assert.match(badName.text, /Введите название ключа\./);
    const pastDay = await ruB.submit('/settings/api', '/settings/api/keys', { name: 'Бухгалтерия', expires: '2001-01-01' });
    assert.match(pastDay.text, /Эта дата уже прошла/);
    const created = await ruB.submit('/settings/api', '/settings/api/keys', { name: 'Бухгалтерия' });
    assert.equal(created.status, 200);
    assertRussian(created, 'new key');
    assert.match(created.text, /data-copied="Скопировано"/);
    // The page that shows a key once: the switch first warns, in English, that the key will not be shown again.
    assert.match(created.text, /<details class="leave" lang="en"><summary id="lang-en">English<\/summary>/);
    assert.match(created.text, /The key on this page will not be shown again: copy it before you switch\.[\s\S]*<a href="\/settings\/api\?lang=en" hreflang="en" id="lang-en-leave">/);
    const revoked = await ruB.submit(`${keyPath}/revoke`, `${keyPath}/revoke`);
    assert.equal(revoked.status, 303);
    const notice = await ruB.get(revoked.location!);
    assertRussian(notice, 'revoked notice');
    assert.match(notice.text, /Ключ «Сайт» отозван: все запросы с ним теперь отклоняются \(401\)\./);
    const forged = await ruB.post('/settings/password', { ...formFields((await ruB.get('/settings/password')).text, '/settings/password'), csrf: 'x'.repeat(43) });
    assert.equal(forged.status, 403);
    assertRussian(forged, 'refused form');
    assert.match(forged.text, /<h1>Форма не принята<\/h1>/);
    const wrong = await ruB.submit('/settings/password', '/settings/password', { current: 'не тот пароль', next: 'новый пароль 2026' });
    assert.equal(wrong.status, 400);
    assertRussian(wrong, 'wrong current password');
    assert.match(wrong.text, /Текущий пароль указан неверно\./);
    const short = await ruB.submit('/settings/password', '/settings/password', { current: d.password, next: 'коротко' });
    assert.match(short.text, /Новый пароль должен быть не короче 12 символов\./);

    const signedOut = await ruB.submit('/settings/api', '/logout');
    assert.equal(signedOut.status, 303);
    const after = await ruB.get(signedOut.location!);
    assertRussian(after, 'signed out');
    assert.match(after.text, /Вы вышли из кабинета\./);
  });
});
