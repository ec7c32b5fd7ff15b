import type { GatewayName, PaymentsConfig } from '../config/types';
import type { UpstreamHttp } from '../providers/http';
import { createZarinpalGateway } from './providers/zarinpal';
import { createZibalGateway } from './providers/zibal';
import type { PaymentGateway } from './types';

/** The configured gateways, each on the core's one dispatcher under its own upstream name. */
export function createGateways(
  config: PaymentsConfig | undefined,
  http: UpstreamHttp,
): Map<GatewayName, PaymentGateway> {
  const gateways = new Map<GatewayName, PaymentGateway>();
  for (const gateway of config?.gateways.values() ?? []) {
    const dispatcher = http.forUpstream({ name: gateway.name, provider: gateway.name });
    gateways.set(
      gateway.name,
      gateway.name === 'zarinpal'
        ? createZarinpalGateway(gateway, dispatcher)
        : createZibalGateway(gateway, dispatcher),
    );
  }
  return gateways;
}
