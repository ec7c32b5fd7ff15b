/** One measured number. Rows with the same scenario and metric are compared across variants. */
export interface BenchRow {
  readonly scenario: string;
  /** The first variant reported for a scenario/metric is the baseline of the ratios. */
  readonly variant: string;
  readonly metric: string;
  readonly value: number;
  readonly unit: string;
}

export interface BenchOptions {
  /** Short runs (the whole bench in a few minutes), for a quick comparison or CI smoke. */
  readonly quick: boolean;
}

/** What every `bench/scenarios/*.ts` module exports. */
export interface BenchScenarioModule {
  run(opts: BenchOptions): Promise<BenchRow[]>;
}
