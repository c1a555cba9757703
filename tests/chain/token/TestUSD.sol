// SPDX-License-Identifier: MIT
// The chain tests' stablecoin: OpenZeppelin's ERC-20 with 6 decimals, like USDC and USDT.
// The deployer receives the whole supply and funds the test senders from it.
pragma solidity ^0.8.20;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

contract TestUSD is ERC20 {
    constructor(uint256 supply) ERC20("Test USD", "TUSD") {
        _mint(msg.sender, supply);
    }

    function decimals() public pure override returns (uint8) {
        return 6;
    }
}
