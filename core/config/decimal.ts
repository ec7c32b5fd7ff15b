/**
 * An exact decimal read from the configuration's text (SPEC §15): `0.55` is 55 / 10^2, never the
 * binary float nearest to it. The YAML loader makes every fraction in the file one of these (its
 * source text kept), so that dollar prices and margins never pass through floating point.
 */
export class Decimal {
  /** The value is `units / 10^scale`. */
  private constructor(
    readonly units: bigint,
    readonly scale: number,
  ) {}

  static readonly ZERO = new Decimal(0n, 0);

  static of(units: bigint, scale = 0): Decimal {
    // Canonical: no trailing zeros after the point, so equal values print alike.
    while (scale > 0 && units % 10n === 0n) {
      units /= 10n;
      scale -= 1;
    }
    return new Decimal(units, scale);
  }

  /**
   * `12`, `-0.5`, `.5`, `1.25e-3`, `1_000.5` (YAML 1.1 underscores are not YAML 1.2's: refused);
   * undefined for anything else (`.inf`, `.nan`, words).
   */
  static parse(text: string): Decimal | undefined {
    const match = /^([-+]?)(\d*)(?:\.(\d*))?(?:[eE]([-+]?\d{1,4}))?$/.exec(text.trim());
    if (match === null) return undefined;
    const [, sign = '', whole = '', fraction = '', exponent] = match;
    if (whole === '' && fraction === '') return undefined;
    let units = BigInt(`${whole}${fraction}` || '0');
    let scale = fraction.length - Number(exponent ?? '0');
    if (scale < 0) {
      units *= 10n ** BigInt(-scale);
      scale = 0;
    }
    return Decimal.of(sign === '-' ? -units : units, scale);
  }

  get negative(): boolean {
    return this.units < 0n;
  }

  /** 10^scale, the denominator. */
  get denominator(): bigint {
    return 10n ** BigInt(this.scale);
  }

  plus(other: Decimal): Decimal {
    const scale = Math.max(this.scale, other.scale);
    return Decimal.of(
      this.units * 10n ** BigInt(scale - this.scale) + other.units * 10n ** BigInt(scale - other.scale),
      scale,
    );
  }

  times(other: Decimal): Decimal {
    return Decimal.of(this.units * other.units, this.scale + other.scale);
  }

  /**
   * The value over `divisor` (above 0): exact when it ends within `digits` more decimal places,
   * else rounded up at the last of them (a per-minute price per second is a sixtieth of it).
   */
  dividedBy(divisor: bigint, digits = 12): Decimal {
    const scaled = this.units * 10n ** BigInt(digits);
    const quotient = scaled / divisor;
    // bigint division truncates toward zero: up for a positive remainder, already up for a negative one.
    return Decimal.of(scaled % divisor > 0n ? quotient + 1n : quotient, this.scale + digits);
  }

  /** The least integer at or above the value. */
  ceil(): bigint {
    const d = this.denominator;
    const q = this.units / d;
    return this.units > q * d ? q + 1n : q;
  }

  compare(other: Decimal): number {
    const scale = Math.max(this.scale, other.scale);
    const a = this.units * 10n ** BigInt(scale - this.scale);
    const b = other.units * 10n ** BigInt(scale - other.scale);
    return a < b ? -1 : a > b ? 1 : 0;
  }

  /** Plain decimal text, exact (`0.125`, `10`, `-0.05`). */
  toString(): string {
    const negative = this.units < 0n;
    const digits = (negative ? -this.units : this.units).toString().padStart(this.scale + 1, '0');
    const whole = digits.slice(0, digits.length - this.scale);
    const fraction = digits.slice(digits.length - this.scale);
    return `${negative ? '-' : ''}${whole}${fraction === '' ? '' : `.${fraction}`}`;
  }

  /** JSON: a number when it is exactly one (every decimal with few digits), else its text. */
  toJSON(): number | string {
    const text = this.toString();
    const n = Number(text);
    return String(n) === text ? n : text;
  }
}

/**
 * Credits per 1M units from a dollar price (SPEC §15): ceil(usd × rate × (1 + margin)), exact.
 * `ceil(0.55 × 98000 × 1.2)` is 64680.
 */
export function creditsFromUsd(usd: Decimal, rate: bigint, margin: Decimal): bigint {
  return usd.times(Decimal.of(rate)).times(Decimal.of(1n).plus(margin)).ceil();
}
