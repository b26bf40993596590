/**
 * Russian people for the demo data: full names (surname, given name, patronymic, with
 * the feminine forms), mobile numbers and e-mail addresses derived from the name.
 */
import { pad } from './context.js';
import type { Random } from './random.js';

const MALE_NAMES = ['Александр', 'Алексей', 'Андрей', 'Артём', 'Владимир', 'Дмитрий', 'Евгений', 'Егор', 'Иван', 'Илья', 'Кирилл', 'Максим', 'Михаил', 'Никита', 'Николай', 'Павел', 'Роман', 'Сергей', 'Тимофей', 'Фёдор', 'Денис', 'Антон', 'Глеб', 'Матвей'];
const FEMALE_NAMES = ['Анастасия', 'Анна', 'Алина', 'Валерия', 'Вера', 'Дарья', 'Екатерина', 'Елена', 'Елизавета', 'Ирина', 'Ксения', 'Мария', 'Марина', 'Наталья', 'Ольга', 'Полина', 'Светлана', 'София', 'Татьяна', 'Юлия', 'Виктория', 'Кристина', 'Алёна', 'Василиса'];
/** Father's name -> [masculine, feminine] patronymic. */
const PATRONYMICS: readonly [string, string][] = [
  ['Александрович', 'Александровна'],
  ['Алексеевич', 'Алексеевна'],
  ['Андреевич', 'Андреевна'],
  ['Викторович', 'Викторовна'],
  ['Владимирович', 'Владимировна'],
  ['Дмитриевич', 'Дмитриевна'],
  ['Евгеньевич', 'Евгеньевна'],
  ['Иванович', 'Ивановна'],
  ['Игоревич', 'Игоревна'],
  ['Константинович', 'Константиновна'],
  ['Михайлович', 'Михайловна'],
  ['Николаевич', 'Николаевна'],
  ['Олегович', 'Олеговна'],
  ['Павлович', 'Павловна'],
  ['Петрович', 'Петровна'],
  ['Сергеевич', 'Сергеевна'],
  ['Юрьевич', 'Юрьевна'],
];
/** Masculine surnames; the feminine form is derived by `feminine`. */
const SURNAMES = ['Иванов', 'Смирнов', 'Кузнецов', 'Попов', 'Васильев', 'Петров', 'Соколов', 'Михайлов', 'Новиков', 'Фёдоров', 'Морозов', 'Волков', 'Алексеев', 'Лебедев', 'Семёнов', 'Егоров', 'Павлов', 'Козлов', 'Степанов', 'Николаев', 'Орлов', 'Андреев', 'Макаров', 'Никитин', 'Захаров', 'Зайцев', 'Соловьёв', 'Борисов', 'Яковлев', 'Григорьев', 'Романов', 'Воробьёв', 'Сергеев', 'Кузьмин', 'Фролов', 'Александров', 'Дмитриев', 'Королёв', 'Гусев', 'Киселёв', 'Ильин', 'Максимов', 'Поляков', 'Сорокин', 'Виноградов', 'Ковалёв', 'Белов', 'Медведев', 'Антонов', 'Тарасов', 'Жуков', 'Баранов', 'Филиппов', 'Комаров', 'Давыдов', 'Беляев', 'Герасимов', 'Богданов', 'Осипов', 'Сидоров', 'Матвеев', 'Титов', 'Марков', 'Миронов', 'Крылов', 'Куликов', 'Карпов', 'Власов', 'Мельников', 'Денисов', 'Гаврилов', 'Тихонов', 'Казаков', 'Афанасьев', 'Данилов', 'Савельев', 'Тимофеев', 'Фомин', 'Чернов', 'Абрамов', 'Мартынов', 'Ефимов', 'Федотов', 'Щербаков', 'Назаров', 'Калинин', 'Исаев', 'Чернышёв', 'Быков', 'Маслов', 'Родионов', 'Коновалов', 'Лазарев', 'Воронин', 'Климов', 'Филатов', 'Пономарёв', 'Голубев', 'Кудрявцев', 'Прохоров', 'Наумов', 'Потапов', 'Журавлёв', 'Овчинников', 'Трофимов', 'Леонов', 'Соболев', 'Ермаков', 'Колесников', 'Гончаров', 'Емельянов', 'Никифоров', 'Грачёв', 'Котов', 'Гришин', 'Ефремов', 'Архипов', 'Громов', 'Кириллов', 'Малышев', 'Панов', 'Моисеев', 'Румянцев', 'Акимов', 'Кондратьев', 'Бирюков', 'Горбунов', 'Анисимов', 'Еремин', 'Тихомиров', 'Галкин', 'Лукьянов', 'Михеев', 'Скворцов', 'Юдин', 'Белоусов', 'Нестеров', 'Симонов', 'Прокофьев', 'Харитонов', 'Князев', 'Цветков', 'Левин', 'Митрофанов', 'Воронов', 'Аксёнов', 'Софронов', 'Мальцев', 'Логинов', 'Горшков', 'Савин', 'Краснов', 'Майоров', 'Демидов', 'Елисеев', 'Рыбаков', 'Сафонов', 'Плотников', 'Демин', 'Хохлов', 'Жданов', 'Руднев', 'Шевченко', 'Ткаченко', 'Бондаренко', 'Кравченко', 'Шевчук', 'Белых', 'Седых', 'Островский', 'Вишневский', 'Покровский', 'Толстой', 'Зелёный'];

const TRANSLIT: Record<string, string> = {
  а: 'a', б: 'b', в: 'v', г: 'g', д: 'd', е: 'e', ё: 'e', ж: 'zh', з: 'z', и: 'i', й: 'y', к: 'k', л: 'l', м: 'm', н: 'n', о: 'o', п: 'p',
  р: 'r', с: 's', т: 't', у: 'u', ф: 'f', х: 'kh', ц: 'ts', ч: 'ch', ш: 'sh', щ: 'shch', ъ: '', ы: 'y', ь: '', э: 'e', ю: 'yu', я: 'ya',
};

const MAIL_DOMAINS = ['mail.ru', 'yandex.ru', 'gmail.com', 'bk.ru', 'inbox.ru', 'list.ru', 'rambler.ru'];
/** Mobile operator codes (DEF codes) seen across Russia. */
const MOBILE_CODES = ['900', '903', '905', '906', '909', '910', '912', '915', '916', '917', '919', '922', '925', '926', '929', '950', '951', '953', '961', '977', '982', '985', '995', '999'];

export type Sex = 'm' | 'f';

export interface Person {
  fullName: string;
  phone: string;
  email: string;
}

/** The feminine form of a masculine surname (Иванов -> Иванова, Островский -> Островская). */
function feminine(surname: string): string {
  if (/(ов|ев|ёв|ин|ын)$/.test(surname)) return `${surname}а`;
  if (/(ский|цкий)$/.test(surname)) return `${surname.slice(0, -2)}ая`;
  if (/(ой|ый|ий)$/.test(surname)) return `${surname.slice(0, -2)}ая`;
  return surname; // Шевченко, Белых: the same for everyone
}

function transliterate(text: string): string {
  return [...text.toLowerCase()].map((ch) => TRANSLIT[ch] ?? ch).join('');
}

export function person(random: Random, sex: Sex = random.chance(0.55) ? 'm' : 'f'): Person {
  const surnameM = random.pick(SURNAMES);
  const surname = sex === 'm' ? surnameM : feminine(surnameM);
  const given = random.pick(sex === 'm' ? MALE_NAMES : FEMALE_NAMES);
  const patronymic = random.pick(PATRONYMICS)[sex === 'm' ? 0 : 1];
  const login = random.chance(0.5) ? `${transliterate(given)}.${transliterate(surname)}` : `${transliterate(surname)}.${transliterate(given)[0]}`;
  // Many addresses carry a birth year or two digits, as real ones do.
  const digits = random.weighted({ none: 4, year: 4, two: 2 });
  const suffix = digits === 'year' ? String(random.int(1965, 2007)) : digits === 'two' ? pad(random.int(1, 99), 2) : '';
  return {
    fullName: `${surname} ${given} ${patronymic}`,
    phone: phone(random),
    email: `${login}${suffix}@${random.pick(MAIL_DOMAINS)}`,
  };
}

/** A Russian mobile number in E.164 form, +7 and ten digits. */
export function phone(random: Random): string {
  return `+7${random.pick(MOBILE_CODES)}${String(random.int(0, 9_999_999)).padStart(7, '0')}`;
}
