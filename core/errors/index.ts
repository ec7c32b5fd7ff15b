export * from './codes';
export * from './svc-error';
export * from './wire';
