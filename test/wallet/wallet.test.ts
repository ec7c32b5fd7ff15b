import { createWalletService } from '../../core/wallet/service';
import { walletCases } from './wallet-cases';

describe('wallet', function () {
  walletCases(createWalletService);
});
