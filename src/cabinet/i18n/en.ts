/**
 * The cabinet's English text: every string a director sees, one entry each. Its shape is
 * the catalogue's type (Messages): the Russian one (ru.ts) must have every entry, with the
 * same arguments, or the type-check fails. Markup is made with `html`, so arguments stay text.
 */
import type { PastPrefix } from '../../domain/addresses.js';
import type { KeyScope } from '../../domain/scopes.js';
import type { Overlap } from '../../domain/overlaps.js';
import type { KeyEvent } from '../../management/keys.js';
import { html, type SafeHtml } from '../html.js';
import { formatCount } from './format.js';

const n = (x: number) => formatCount('en', x);
const requests = (x: number) => `${n(x)} ${x === 1 ? 'request' : 'requests'}`;

/** Why a key needs attention within 7 days (src/cabinet/views/key.ts). */
export type WarningKind = 'retires' | 'expires' | 'unused';

export const en = {
  layout: {
    titleSuffix: 'school-data cabinet',
    brand: "Director's cabinet",
    password: 'Password',
    signOut: 'Sign out',
    languages: 'Language',
    leaveWarning: 'The key on this page will not be shown again: copy it before you switch.',
    leaveAndSwitch: 'Switch to English and go to the API keys',
  },
  login: {
    title: 'Sign in',
    intro: "The cabinet of a driving school's director: the school's API keys.",
    email: 'Email',
    password: 'Password',
    submit: 'Sign in',
    noAccount: 'No account yet?',
    noAccountHint: (): SafeHtml => html`A director's account is made by whoever runs this service, in the service's folder on its server:
        <code>npx school-data director add --school SCHOOL_ID --email EMAIL</code> prints a password once
        (<code>npx school-data school list</code> shows the school ids). The demo, <code>npx school-data demo</code>,
        makes a director for each demo school and prints their sign-in beside the keys.`,
    expired: 'Your session has ended. Sign in again to continue.',
    signedOut: 'You have signed out.',
    enterBoth: 'Enter your email and your password.',
    unavailable: 'Signing in is unavailable for a moment. Try again shortly.',
    throttled: 'Too many sign-in attempts. Wait a minute, then try again.',
    wrong: 'Wrong email or password.',
  },
  keys: {
    title: 'Settings · API',
    crumbs: 'Settings › API',
    heading: 'API keys',
    plan: 'Plan',
    limit: 'Request limit',
    limitValue: (perMinute: number) => `${n(perMinute)} requests per minute, shared by all of the school's keys`,
    noApiOnPlan: 'no API access on this plan',
    howToUse: 'How to use a key',
    howToUseValue: (): SafeHtml => html`send the header <code>Authorization: Bearer &lt;key&gt;</code> with each request`,
    noApiPlan: (plan: string) => `Your school's plan, ${plan}, does not include API access.`,
    apiPlans: 'API keys can be created on the Profi and VIP plans.',
    keptKeysRefused: 'The keys listed below stay valid but are refused (402) until the school moves back to Profi or VIP.',
    keyLimit: (max: number) => `Your school has ${max} active keys, the most it can have.`,
    keyLimitHint: 'Revoke a key that is no longer used to create a new one.',
    create: 'Create a key',
    name: 'Key name',
    nameHint: (active: number, max: number) => `1-100 characters, for you to tell keys apart, such as "Accounting" or "Website". ${active} of ${max} active keys in use.`,
    createButton: 'Create key',
    options: 'Limit the key (optional)',
    scopes: 'Resources it may read (none ticked: all)',
    expires: (timeZone: string) => `Expires on (the key works through this day, ${timeZone}; empty: never)`,
    allow: 'Only from these addresses (comma-separated IPv4/IPv6 addresses and CIDR ranges; empty: any)',
    list: 'Keys',
    none: 'No keys yet.',
    columns: { name: 'Name', key: 'Key', created: 'Created', lastUsed: 'Last used', requests: 'Requests', status: 'Status', action: 'Action' },
    limitedAddresses: 'limited addresses',
    until: (when: string) => `until ${when}`,
    revoke: 'Revoke',
    timesHint: (timeZone: string) => `Times are in ${timeZone}. The request counter and last use are updated within a few seconds of each request.`,
    revoked: (name: string) => `The key “${name}” is revoked: every request with it is now refused (401).`,
    notCreated: 'The key was not created: the school\'s plan or its number of active keys no longer allows it (see above).',
  },
  key: {
    quoted: (name: string) => `“${name}”`,
    never: 'never',
    noExpiry: 'never',
    allResources: 'all resources',
    scope: { students: 'students', instructors: 'instructors', vehicles: 'vehicles', lessons: 'lessons', contracts: 'contracts', payments: 'payments', leads: 'leads', finance: 'finance' } satisfies Record<KeyScope, string>,
    active: 'Active',
    expired: 'Expired',
    revoked: 'Revoked',
    unused: ' (unused)',
    rolled: ' (rolled)',
    title: (name: string) => `Key ${name}`,
    crumb: 'Key',
    heading: (name: string) => `Key “${name}”`,
    warningListed: (kind: WarningKind, name: SafeHtml, when: string): SafeHtml =>
      kind === 'retires' ? html`The key ${name} ends ${when} (it was rolled).`
      : kind === 'expires' ? html`The key ${name} expires ${when}.`
      : html`The key ${name} will be revoked as unused ${when} unless it is used before.`,
    warningOwn: (kind: WarningKind, when: string) =>
      kind === 'retires' ? `This key ends ${when} (it was rolled).`
      : kind === 'expires' ? `This key expires ${when}.`
      : `This key will be revoked as unused ${when} unless it is used before.`,
    facts: {
      key: 'Key', created: 'Created', lastUsed: 'Last used', requests: 'Requests', scopes: 'May read', expires: 'Expires',
      allow: 'From addresses', unused: 'Revoked if unused until', retires: 'Ends (rolled)', ended: 'Ended',
    },
    anyAddress: 'any address',
    allowHeading: 'Addresses the key may be used from',
    allowLabel: 'Addresses and networks',
    allowHint: 'Comma-separated IPv4/IPv6 addresses and CIDR ranges, such as 203.0.113.7, 10.0.0.0/8. Empty: any address. Requests from elsewhere are refused (403).',
    allowSave: 'Save addresses',
    allowSaved: 'The addresses are saved: the next request with this key is checked against them.',
    allowNotSaved: 'The addresses were not saved: the key ended in the meantime (it was revoked, it expired, or its roll\'s overlap is over).',
    roll: 'Roll the key',
    rollHint: 'Makes a new key with the same name, resources and addresses (shown once), and ends this one after the overlap you choose, so the integration can switch without downtime.',
    overlap: 'This key keeps working',
    overlaps: { now: 'no longer: end it now', '1h': '1 more hour', '24h': '24 more hours', '7d': '7 more days' } satisfies Record<Overlap, string>,
    rollButton: 'Roll key',
    notRolled: 'The key was not rolled: it was revoked or rolled in the meantime.',
    notRolledPlan: (plan: string) => `The key was not rolled: your school's plan, ${plan}, does not include API access, so no new key can be made.`,
    notRolledLimit: (max: number) => `The key was not rolled: your school has ${max} active keys, the most it can have, and the new key needs a place of its own until this one ends. Revoke a key that is no longer used, then roll this one.`,
    perDay: 'Requests per day',
    lastRequests: 'Last requests',
    events: 'Events',
    eventsCut: (shown: number) => `The latest ${n(shown)} events are shown; your platform's operator can list them all.`,
    back: 'Back to API keys',
    noRequests: 'No requests recorded yet.',
    chartLabel: (total: number, days: number) => `Requests per day: ${n(total)} in ${days} days`,
    chartBar: (day: string, count: number) => `${day}: ${requests(count)}`,
    chartMax: (max: number) => `max ${n(max)}/day`,
    chartCaption: (total: number, days: number) => `${requests(total)} in the last ${days} days (UTC days).`,
    requestColumns: { time: 'Time', request: 'Request', status: 'Status', ms: 'ms', address: 'Address', id: 'Request id' },
    eventColumns: { time: 'Time', event: 'Event', by: 'By', detail: 'Detail' },
    eventNames: { created: 'Created', rolled: 'Rolled', revoked: 'Revoked', expired: 'Expired', revoked_unused: 'Revoked as unused', options_changed: 'Options changed' } satisfies Record<KeyEvent, string>,
    operator: 'operator',
    eventAddresses: (to: string[] | null) => `addresses: ${to === null ? 'any' : to.join(', ')}`,
    eventRolled: (newKey: string, overlap: string) => `new key ${newKey}, overlap ${overlap}`,
    overlapShort: { now: 'now', '1h': '1h', '24h': '24h', '7d': '7d' } satisfies Record<Overlap, string>,
    eventOverlapEnd: "end of the roll's overlap",
    eventReplaces: (oldKey: string) => `replaces ${oldKey}`,
  },
  newKey: {
    title: 'New API key',
    crumbs: 'Settings › API › New key',
    heading: 'Your new API key',
    copyNow: 'Copy the key now: it will not be shown again.',
    onlyFingerprint: 'Only a fingerprint of the key is kept, so nobody can show it to you later. If it is lost, revoke it and create another.',
    label: 'API key',
    copy: 'Copy',
    copied: 'Copied',
    copyByHand: 'Press Ctrl+C to copy',
    hint: (hint: string): SafeHtml => html`In the key list it appears as <code>${hint}</code>. Send it as <code>Authorization: Bearer &lt;key&gt;</code>.`,
    back: 'I have copied the key — back to API keys',
  },
  revoke: {
    crumbs: 'Settings › API › Revoke key',
    doneTitle: 'Key revoked',
    already: (name: string) => `Key “${name}” is already revoked`,
    title: 'Revoke key',
    heading: (name: string) => `Revoke the key “${name}”?`,
    cannotUndo: 'This takes effect at once and cannot be undone.',
    consequence: 'Every request made with this key from now on is refused (401), so whatever uses it stops working.',
    button: 'Revoke key',
    cancel: 'Cancel',
  },
  password: {
    title: 'Change password',
    crumbs: 'Settings',
    crumb: 'Password',
    heading: 'Change your password',
    current: 'Current password',
    next: 'New password',
    hint: (min: number) => `At least ${min} characters. Every other sign-in of yours ends when it is changed.`,
    button: 'Change password',
    changed: 'Your password is changed; every other sign-in of yours has ended.',
    wrongCurrent: 'The current password is not right.',
    unavailable: 'Changing the password is unavailable for a moment. Try again shortly.',
    throttled: 'Too many attempts with a wrong password. Wait a minute, then try again.',
    tooShort: (min: number) => `The new password must have at least ${min} characters.`,
    tooLong: (max: number) => `The new password can have at most ${max} characters.`,
    control: 'The new password cannot contain control characters such as tabs or line breaks.',
  },
  form: {
    nameMissing: 'Enter a name for the key.',
    nameTooLong: (max: number, length: number) => `The name can be at most ${max} characters long (it has ${length}).`,
    nameControl: 'The name cannot contain control characters such as tabs or line breaks, nor marks that turn the direction of the text.',
    nameHoldsKey: 'The name cannot hold a key (service_pk_...): names are shown in lists and in the audit. Keep the key itself secret.',
    notADate: 'The expiry date is not a date.',
    pastDate: 'The expiry date has passed: choose today or a later day.',
    tooLate: 'The expiry date is too far ahead: choose an earlier day.',
    allowEmpty: 'Name at least one address or CIDR range, or leave the field empty for any address.',
    allowTooMany: (max: number) => `At most ${max} addresses and ranges can be listed.`,
    allowBad: (entry: string) => `“${entry}” is not an IPv4/IPv6 address or a CIDR range.`,
    allowPastPrefix: (p: PastPrefix) => `“${p.entry}” has address bits past its prefix: write ${p.range} for the whole range, or ${p.address} for the one address.`,
  },
  errors: {
    back: 'Back to the cabinet',
    footer: (status: number) => `Error ${status} · request id`,
    formRefused: 'Form not accepted',
    refusals: {
      other_origin:
        'The browser said this form was sent from another site or address, not from a page of this cabinet. Nothing was changed. Open the cabinet at its own address and send the form from its page; if you did, a browser extension or a proxy may be changing your requests.',
      missing_token: 'The form arrived without its security token, which every cabinet form carries. Nothing was changed. Open the page again and send the form from there.',
      wrong_token: "The form's security token was not one this cabinet gave out: it was changed on the way. Nothing was changed. Open the page again and send the form from there.",
      expired_sign_in:
        "This sign-in page is out of date: it was open for more than an hour, or the browser did not keep the cabinet's cookie. Nothing was changed. Open the sign-in page again and retry; if this happens again, allow cookies for this site.",
      expired_page: 'This page is out of date: it was opened before your latest sign-in, so its form is no longer valid. Nothing was changed. Open the page again and retry.',
    },
    pages: {
      notFound: { title: 'Not found', message: 'There is no such page or key in your cabinet.' },
      incomplete: { title: 'Form not accepted', message: 'The form was incomplete. Nothing was changed. Open the page again and retry.' },
      alreadySent: {
        title: 'Form already sent',
        message: 'This form was already sent. A new key is shown only once, right after it is created, so it cannot be shown again. Open API keys to see your keys; revoke a key you did not copy and create another.',
      },
      tooLarge: { title: 'Form too large', message: 'The form sent was larger than any cabinet form can be. Nothing was changed.' },
      notForm: { title: 'Form not accepted', message: 'Cabinet forms are sent as ordinary HTML forms. Nothing was changed.' },
      badRequest: { title: 'Bad request', message: 'The request could not be understood. Nothing was changed.' },
      unavailable: { title: 'Temporarily unavailable', message: 'The cabinet cannot reach its data store right now. Nothing was changed; try again in a moment.' },
      busy: { title: 'Busy with an import', message: 'The data store is busy with a long write, such as an import. Nothing was changed; try again in a minute.' },
      internal: { title: 'Something went wrong', message: 'The cabinet could not finish this request. The request id below identifies it in our logs.' },
    },
  },
};

export type Messages = typeof en;
/** The error pages a CabinetError can name. */
export type ErrorPage = keyof Messages['errors']['pages'];
