/** One measured number. Rows with the same scenario and metric are compared across variants. */
export interface BenchRow {
  readonly scenario: string;
  /** The first variant reported for a scenario/metric is the baseline of the ratios. */
  readonly variant: string;
  readonly metric: string;
  readonly value: number;
  readonly unit: string;
  /** The offered load (requests per second) of a latency row: such rows make the latency-vs-load chart. */
  readonly load?: number;
}

export interface BenchOptions {
  /** Short runs (the whole bench in a few minutes), for a quick comparison or CI smoke. */
  readonly quick: boolean;
  /**
   * Reports a part that failed (a peer that would not start, a run with errors) without failing
   * the scenario: the others' numbers still count, and the failure is listed in the results.
   */
  readonly fail: (what: string, error: unknown) => void;
}

/** What every `bench/scenarios/*.ts` module exports. */
export interface BenchScenarioModule {
  run(opts: BenchOptions): Promise<BenchRow[]>;
}
