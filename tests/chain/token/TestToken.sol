// SPDX-License-Identifier: MIT
// A test ERC-20 of any name, symbol and decimals (OpenZeppelin's): the chain tests' other tokens, such
// as an 18-decimal one standing in for DAI. The deployer receives the whole supply.
pragma solidity ^0.8.20;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

contract TestToken is ERC20 {
    uint8 private immutable _decimals;

    constructor(string memory name_, string memory symbol_, uint8 decimals_, uint256 supply)
        ERC20(name_, symbol_)
    {
        _decimals = decimals_;
        _mint(msg.sender, supply);
    }

    function decimals() public view override returns (uint8) {
        return _decimals;
    }
}
