// SPDX-License-Identifier: MIT
// A token that misbehaves on `transfer`, as its owner chooses: Normal (moves and returns true),
// ReturnFalse (moves nothing, returns false), Revert, or Reenter (first calls `target` with `data`,
// recording whether that call succeeded, then moves the tokens). The attack tests' adversary.
pragma solidity ^0.8.20;

contract HostileToken {
    enum Mode {Normal, ReturnFalse, Revert, Reenter}

    event Transfer(address indexed from, address indexed to, uint256 value);

    mapping(address => uint256) public balanceOf;
    Mode public mode;
    address public target;
    bytes public data;
    uint256 public reentries;
    uint256 public reentriesSucceeded;

    constructor(uint256 supply) {
        balanceOf[msg.sender] = supply;
    }

    function setMode(Mode mode_, address target_, bytes calldata data_) external {
        mode = mode_;
        target = target_;
        data = data_;
    }

    function transfer(address to, uint256 value) external returns (bool) {
        if (mode == Mode.ReturnFalse) return false;
        if (mode == Mode.Revert) revert("hostile");
        if (mode == Mode.Reenter) {
            reentries += 1;
            (bool ok, ) = target.call(data);
            if (ok) reentriesSucceeded += 1;
        }
        require(balanceOf[msg.sender] >= value, "balance");
        balanceOf[msg.sender] -= value;
        balanceOf[to] += value;
        emit Transfer(msg.sender, to, value);
        return true;
    }
}
