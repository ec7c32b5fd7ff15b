import type { Product, WebResult } from '../../types';

/** Sandbox pages, with the words they match besides their own text. */
export const SANDBOX_PAGES: ReadonlyArray<Omit<WebResult, 'date'> & { readonly keywords: string }> = [
  {
    title: 'svc sandbox: how to configure a real web search provider',
    url: 'https://sandbox.svc.invalid/docs/web-search',
    summary:
      'Set tools.web_search.provider to perplexity or searxng in the svc configuration file to get live results.',
    keywords: 'svc config perplexity searxng web search',
  },
  {
    title: 'Node.js 20 release notes',
    url: 'https://sandbox.svc.invalid/web/nodejs-20',
    summary: 'Sample page: Node.js 20 brings a stable test runner, a permission model and V8 11.3.',
    keywords: 'node nodejs javascript release',
  },
  {
    title: 'TypeScript handbook: strict mode',
    url: 'https://sandbox.svc.invalid/web/typescript-strict',
    summary: 'Sample page: strict mode turns on strictNullChecks, noImplicitAny and related checks.',
    keywords: 'typescript strict compiler',
  },
  {
    title: 'Model Context Protocol: tools',
    url: 'https://sandbox.svc.invalid/web/mcp-tools',
    summary: 'Sample page: MCP servers expose tools with input and output schemas that clients can call.',
    keywords: 'mcp model context protocol tools',
  },
  {
    title: 'آب‌وهوای تهران',
    url: 'https://sandbox.svc.invalid/web/tehran-weather',
    summary: 'صفحهٔ نمونه: تهران تابستان‌های گرم و خشک و زمستان‌های سرد دارد.',
    keywords: 'تهران هوا آب‌وهوا weather tehran',
  },
  {
    title: 'تاریخچهٔ اصفهان',
    url: 'https://sandbox.svc.invalid/web/isfahan-history',
    summary: 'صفحهٔ نمونه: اصفهان در دورهٔ صفوی پایتخت ایران بود و میدان نقش جهان از آن دوران است.',
    keywords: 'اصفهان تاریخ isfahan history',
  },
  {
    title: 'FastAPI release notes',
    url: 'https://sandbox.svc.invalid/web/fastapi',
    summary: 'Sample page: FastAPI publishes its release notes with every version.',
    keywords: 'fastapi python release notes',
  },
];

/** Sandbox places: [name, address, category, latitude, longitude, words they match]. */
export const SANDBOX_PLACES: ReadonlyArray<readonly [string, string, string, number, number, string]> = [
  [
    'داروخانه ولیعصر (نمونه)',
    'تهران، خیابان ولیعصر، بالاتر از میدان ولیعصر',
    'داروخانه',
    35.71402,
    51.40634,
    'pharmacy drugstore داروخانه',
  ],
  [
    'داروخانه شبانه‌روزی ونک (نمونه)',
    'تهران، میدان ونک',
    'داروخانه',
    35.75745,
    51.40994,
    'pharmacy drugstore داروخانه',
  ],
  [
    'کافه ولیعصر (نمونه)',
    'تهران، خیابان ولیعصر، نرسیده به چهارراه طالقانی',
    'کافه',
    35.70689,
    51.40712,
    'cafe coffee کافه قهوه',
  ],
  ['کافه لمیز (نمونه)', 'تهران، خیابان انقلاب', 'کافه', 35.70101, 51.39102, 'cafe coffee کافه قهوه'],
  ['رستوران شاندیز (نمونه)', 'تهران، بزرگراه چمران', 'رستوران', 35.76012, 51.39511, 'restaurant food رستوران غذا'],
  ['بیمارستان سینا (نمونه)', 'تهران، خیابان امام خمینی', 'بیمارستان', 35.68693, 51.41172, 'hospital بیمارستان'],
  ['میدان آزادی (نمونه)', 'تهران، میدان آزادی', 'میدان', 35.69972, 51.33806, 'square landmark میدان آزادی azadi'],
  ['پارک ملت (نمونه)', 'تهران، بزرگراه مدرس', 'پارک', 35.77691, 51.41803, 'park بوستان پارک'],
  ['بانک ملی شعبه فردوسی (نمونه)', 'تهران، خیابان فردوسی', 'بانک', 35.68977, 51.42005, 'bank atm بانک'],
  [
    'داروخانه نقش جهان (نمونه)',
    'اصفهان، میدان نقش جهان',
    'داروخانه',
    32.65746,
    51.67761,
    'pharmacy drugstore داروخانه',
  ],
  ['کافه حافظیه (نمونه)', 'شیراز، خیابان حافظ', 'کافه', 29.62515, 52.55858, 'cafe coffee کافه قهوه'],
];

/** Sandbox products; prices in toman (one has none, as real shops show). */
export const SANDBOX_PRODUCTS: ReadonlyArray<
  Omit<Product, 'offers' | 'price_is_lowest'> & { readonly keywords: string }
> = [
  {
    title: 'گوشی موبایل سامسونگ Galaxy A55 (نمونه)',
    price_toman: 25_500_000,
    store: 'فروشگاه نمونه',
    url: 'https://sandbox.svc.invalid/shop/a55',
    image_url: null,
    keywords: 'phone mobile samsung گوشی موبایل سامسونگ',
  },
  {
    title: 'گوشی موبایل سامسونگ Galaxy A35 (نمونه)',
    price_toman: 17_399_000,
    store: 'فروشگاه نمونه',
    url: 'https://sandbox.svc.invalid/shop/a35',
    image_url: null,
    keywords: 'phone mobile samsung گوشی موبایل سامسونگ',
  },
  {
    title: 'گوشی موبایل شیائومی Redmi Note 13 (نمونه)',
    price_toman: 12_850_000,
    store: 'فروشگاه نمونه',
    url: 'https://sandbox.svc.invalid/shop/redmi13',
    image_url: null,
    keywords: 'phone mobile xiaomi redmi گوشی موبایل شیائومی',
  },
  {
    title: 'گوشی موبایل اپل iPhone 15 (نمونه)',
    price_toman: null,
    store: 'فروشگاه نمونه',
    url: 'https://sandbox.svc.invalid/shop/iphone15',
    image_url: null,
    keywords: 'phone mobile apple iphone گوشی موبایل اپل آیفون',
  },
  {
    title: 'قاب گوشی سامسونگ A55 چرمی (نمونه)',
    price_toman: 490_000,
    store: 'غرفه نمونه',
    url: 'https://sandbox.svc.invalid/shop/a55-case',
    image_url: null,
    keywords: 'case cover samsung قاب سامسونگ',
  },
  {
    title: 'لپ‌تاپ لنوو IdeaPad 3 (نمونه)',
    price_toman: 32_000_000,
    store: 'فروشگاه نمونه',
    url: 'https://sandbox.svc.invalid/shop/ideapad3',
    image_url: null,
    keywords: 'laptop notebook lenovo لپ‌تاپ لپتاپ لنوو',
  },
  {
    title: 'هدفون بی‌سیم انکر (نمونه)',
    price_toman: 1_950_000,
    store: 'فروشگاه نمونه',
    url: 'https://sandbox.svc.invalid/shop/anker',
    image_url: null,
    keywords: 'headphone earbuds anker هدفون هندزفری',
  },
  {
    title: 'کتری برقی فیلیپس (نمونه)',
    price_toman: 2_400_000,
    store: 'فروشگاه نمونه',
    url: 'https://sandbox.svc.invalid/shop/kettle',
    image_url: null,
    keywords: 'kettle philips کتری برقی فیلیپس',
  },
];
