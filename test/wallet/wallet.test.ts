import { createWalletService } from '../../core/wallet/service';
import { capCases } from './cap-cases';
import { walletCases } from './wallet-cases';

describe('wallet', function () {
  walletCases(createWalletService);
  describe('per-key spend caps', function () {
    capCases(createWalletService);
  });
});
