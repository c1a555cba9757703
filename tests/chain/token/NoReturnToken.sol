// SPDX-License-Identifier: MIT
// A token like Tether's USDT on Ethereum: `transfer` returns nothing (no boolean), so a caller
// that decodes a bool from it reverts. 6 decimals; the deployer receives the supply.
pragma solidity ^0.8.20;

contract NoReturnToken {
    event Transfer(address indexed from, address indexed to, uint256 value);

    mapping(address => uint256) public balanceOf;
    uint8 public constant decimals = 6;

    constructor(uint256 supply) {
        balanceOf[msg.sender] = supply;
        emit Transfer(address(0), msg.sender, supply);
    }

    function transfer(address to, uint256 value) external {
        require(balanceOf[msg.sender] >= value, "balance");
        balanceOf[msg.sender] -= value;
        balanceOf[to] += value;
        emit Transfer(msg.sender, to, value);
    }
}
