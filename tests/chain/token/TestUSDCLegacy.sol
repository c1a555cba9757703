// SPDX-License-Identifier: MIT
// TestUSDC as deployed USDC (FiatToken v2) answers: no eip712Domain() (EIP-5267), so the domain is
// read from name() and version(), then checked against DOMAIN_SEPARATOR().
pragma solidity ^0.8.20;

import {TestUSDC} from "./TestUSDC.sol";

contract TestUSDCLegacy is TestUSDC {
    constructor(uint256 supply) TestUSDC(supply) {}

    function eip712Domain() public pure override returns (
        bytes1, string memory, string memory, uint256, address, bytes32, uint256[] memory
    ) {
        revert();
    }
}
