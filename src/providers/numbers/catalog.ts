/**
 * The sandbox carrier's catalog: where its local numbers are (area codes and city prefixes with
 * their region), what each kind of number can do, and what it costs a month. Figures follow the
 * public list prices of the large CPaaS carriers (USD per month), rounded.
 */
import type { NumberCapability, NumberType } from './types.ts';

const US_AREA_CODES: Record<string, string> = {
  AL: '205 251 256 334 659 938', AK: '907', AZ: '480 520 602 623 928', AR: '479 501 870',
  CA: '209 213 279 310 323 341 408 415 424 442 510 530 559 562 619 626 628 650 657 661 669 707 714 747 760 805 818 820 831 840 858 909 916 925 949 951',
  CO: '303 719 720 970', CT: '203 475 860 959', DE: '302', DC: '202', GA: '229 404 470 478 678 706 762 770 912 943',
  FL: '239 305 321 352 386 407 448 561 656 689 727 754 772 786 813 850 863 904 941 954',
  HI: '808', ID: '208 986', IL: '217 224 309 312 331 447 464 618 630 708 773 779 815 847 872', IN: '219 260 317 463 574 765 812 930',
  IA: '319 515 563 641 712', KS: '316 620 785 913', KY: '270 364 502 606 859', LA: '225 318 337 504 985', ME: '207',
  MD: '240 301 410 443 667', MA: '339 351 413 508 617 774 781 857 978', MI: '231 248 269 313 517 586 616 734 810 906 947 989',
  MN: '218 320 507 612 651 763 952', MS: '228 601 662 769', MO: '314 417 573 636 660 816', MT: '406', NE: '308 402 531',
  NV: '702 725 775', NH: '603', NJ: '201 551 609 640 732 848 856 862 908 973', NM: '505 575',
  NY: '212 315 332 347 516 518 585 607 631 646 680 716 718 838 845 914 917 929 934', NC: '252 336 704 743 828 910 919 980 984',
  ND: '701', OH: '216 220 234 330 380 419 440 513 567 614 740 937', OK: '405 539 580 918', OR: '458 503 541 971',
  PA: '215 223 267 272 412 445 484 570 610 717 724 814 878', RI: '401', SC: '803 839 843 854 864', SD: '605',
  TN: '423 615 629 731 865 901 931', UT: '385 435 801', VT: '802', VA: '276 434 540 571 703 757 804 826 948',
  TX: '210 214 254 281 325 346 361 409 430 432 469 512 682 713 726 737 806 817 830 832 903 915 936 940 945 956 972 979',
  WA: '206 253 360 425 509 564', WV: '304 681', WI: '262 414 534 608 715 920', WY: '307',
};

const CA_AREA_CODES: Record<string, string> = {
  AB: '368 403 587 780 825', BC: '236 250 604 672 778', MB: '204 431', NB: '428 506', NL: '709', NS: '782 902',
  ON: '226 249 289 343 365 416 437 519 548 613 647 705 807 905', QC: '367 418 438 450 514 579 581 819 873', SK: '306 639',
  YT: '867',
};

/** Leading national digits of geographic numbers → city, for countries with open numbering. */
const CITY_PREFIXES: Record<string, Record<string, string>> = {
  GB: {
    20: 'London', 121: 'Birmingham', 161: 'Manchester', 113: 'Leeds', 114: 'Sheffield', 115: 'Nottingham', 116: 'Leicester',
    117: 'Bristol', 118: 'Reading', 131: 'Edinburgh', 141: 'Glasgow', 151: 'Liverpool', 191: 'Newcastle', 29: 'Cardiff', 28: 'Belfast',
  },
  DE: { 30: 'Berlin', 40: 'Hamburg', 89: 'Munich', 69: 'Frankfurt am Main', 221: 'Cologne', 211: 'Düsseldorf', 711: 'Stuttgart' },
};

function invert(byRegion: Record<string, string>): Map<string, string> {
  const out = new Map<string, string>();
  for (const [region, codes] of Object.entries(byRegion)) for (const code of codes.split(' ')) out.set(code, region);
  return out;
}

/** Local-number prefixes (national digits) the sandbox draws from, with their region, by country. */
export const LOCAL_PREFIXES: Record<string, Map<string, string>> = {
  US: invert(US_AREA_CODES),
  CA: invert(CA_AREA_CODES),
  ...Object.fromEntries(Object.entries(CITY_PREFIXES).map(([country, prefixes]) => [country, new Map(Object.entries(prefixes))])),
};

const countryNames = new Intl.DisplayNames(['en'], { type: 'region' });

/** State, province or city of a local number where the catalog knows it; otherwise the country's name. */
export function regionOf(country: string, type: NumberType, nationalNumber: string): string {
  if (type === 'local') {
    const prefixes = LOCAL_PREFIXES[country];
    if (prefixes) {
      for (let len = Math.min(4, nationalNumber.length); len >= 1; len--) {
        const region = prefixes.get(nationalNumber.slice(0, len));
        if (region) return region;
      }
    }
  }
  return countryNames.of(country) ?? country;
}

const NANP_SMS_COUNTRIES = new Set(['US', 'CA']);
const MMS_MOBILE_COUNTRIES = new Set(['AU']);

/**
 * What a number can do. North American local and toll-free numbers take SMS and MMS (about one
 * local number in five comes from a carrier without MMS); elsewhere geographic and toll-free
 * numbers are voice-only and messaging needs a mobile number. WhatsApp can be registered on any
 * number that receives SMS, except toll-free ones in this sandbox.
 */
export function capabilitiesOf(country: string, type: NumberType, nationalNumber: string): NumberCapability[] {
  const caps: NumberCapability[] = ['voice'];
  if (NANP_SMS_COUNTRIES.has(country) && (type === 'local' || type === 'toll_free')) {
    caps.push('sms');
    if (type === 'toll_free' || digitSum(nationalNumber) % 5 !== 0) caps.push('mms');
    if (type === 'local') caps.push('whatsapp');
    return caps;
  }
  if (type === 'mobile') {
    caps.push('sms');
    if (MMS_MOBILE_COUNTRIES.has(country)) caps.push('mms');
    caps.push('whatsapp');
  }
  return caps;
}

/** Every capability some number of this country and type has (search skips types that cannot match at all). */
export function possibleCapabilitiesOf(country: string, type: NumberType): NumberCapability[] {
  // A digit sum of 1 is never a multiple of 5: the number with the most capabilities.
  return capabilitiesOf(country, type, '1');
}

function digitSum(digits: string): number {
  let sum = 0;
  for (const d of digits) sum += Number(d);
  return sum;
}

type Prices = Partial<Record<NumberType, string>>;

/** Monthly price in USD by country and type; DEFAULT_PRICES elsewhere. */
const PRICES: Record<string, Prices> = {
  US: { local: '1.15', toll_free: '2.15' },
  CA: { local: '1.15', toll_free: '2.15' },
  GB: { local: '1.15', mobile: '1.15', toll_free: '2.15' },
  IE: { local: '1.15', mobile: '6.00', toll_free: '25.00' },
  DE: { local: '1.15', mobile: '15.00', toll_free: '25.00' },
  FR: { local: '1.15', mobile: '3.00', toll_free: '25.00' },
  ES: { local: '1.15', mobile: '8.00', toll_free: '25.00' },
  IT: { local: '1.15', mobile: '8.00', toll_free: '25.00' },
  NL: { local: '1.15', mobile: '4.00', toll_free: '25.00' },
  SE: { local: '1.15', mobile: '3.00', toll_free: '25.00' },
  AU: { local: '3.00', mobile: '6.50', toll_free: '16.00' },
  NZ: { local: '3.00', mobile: '6.00', toll_free: '16.00' },
  JP: { local: '4.50', mobile: '30.00', toll_free: '25.00' },
  BR: { local: '8.00', mobile: '12.00', toll_free: '25.00' },
  MX: { local: '4.00', toll_free: '25.00' },
  IN: { local: '20.00', mobile: '20.00', toll_free: '40.00' },
};
const DEFAULT_PRICES: Required<Omit<Prices, 'short_code'>> = { local: '3.00', mobile: '6.00', toll_free: '25.00' };

export const CURRENCY = 'USD';

export function monthlyCostOf(country: string, type: NumberType): string {
  return PRICES[country]?.[type] ?? DEFAULT_PRICES[type as keyof typeof DEFAULT_PRICES] ?? DEFAULT_PRICES.local;
}
