// SPDX-License-Identifier: MIT
// The payout mode's deposit addresses (docs/payments.md, "The forwarder contract").
//
// A process's deposit address is the CREATE2 address of (this factory, the process's salt, the
// Forwarder's creation code followed by abi.encode(payout)). Nothing is deployed when the address
// is handed out. `collect` creates the Forwarder there: its constructor moves the listed tokens'
// balances and the gas coin to the payout address it was made for, and self-destructs in the same
// transaction, so (EIP-6780) the address is empty again and a later payment is collected the same way.
// No owner, no storage, no admin function: whoever calls, money at an address can only go to the
// payout address in that address's own creation code.
pragma solidity 0.8.26;

contract ForwarderFactory {
    error Reentered();

    // Transient storage while `collect` runs: slot 0 holds the token count + 1 (non-zero: running),
    // slot 1 + i the i-th token. Read back by each Forwarder's constructor through `tokens()`, so the
    // token list is not part of the creation code and does not change the address.
    uint256 private constant RUNNING = 0;

    struct Deposit {
        address payout;
        bytes32 salt;
    }

    /// Moves every listed token's balance, and the gas coin, out of each deposit address to its payout
    /// address. Anyone may call it: the arguments choose which addresses are emptied, never where the
    /// money goes. A token whose balanceOf or transfer fails (reverts, returns false) is left where it
    /// is; the other tokens and addresses are still collected. Each deposit may appear once per call.
    function collect(address[] calldata tokens_, Deposit[] calldata deposits) external {
        uint256 running;
        assembly ("memory-safe") {
            running := tload(RUNNING)
        }
        if (running != 0) revert Reentered();
        assembly ("memory-safe") {
            tstore(RUNNING, add(tokens_.length, 1))
        }
        for (uint256 i = 0; i < tokens_.length; i++) {
            address token = tokens_[i];
            assembly ("memory-safe") {
                tstore(add(i, 1), token)
            }
        }
        bytes memory initCode = abi.encodePacked(type(Forwarder).creationCode, uint256(0));
        for (uint256 i = 0; i < deposits.length; i++) {
            address payout = deposits[i].payout;
            bytes32 salt = deposits[i].salt;
            address created;
            assembly ("memory-safe") {
                // the last word of the init code is the constructor's argument: this deposit's payout
                mstore(add(initCode, mload(initCode)), payout)
                created := create2(0, add(initCode, 0x20), mload(initCode), salt)
            }
            require(created != address(0), "forwarder creation failed");
        }
        assembly ("memory-safe") {
            tstore(RUNNING, 0)
        }
    }

    /// The token list of the `collect` call running now (empty outside one).
    function tokens() external view returns (address[] memory list) {
        uint256 running;
        assembly ("memory-safe") {
            running := tload(RUNNING)
        }
        list = new address[](running == 0 ? 0 : running - 1);
        for (uint256 i = 0; i < list.length; i++) {
            address token;
            assembly ("memory-safe") {
                token := tload(add(i, 1))
            }
            list[i] = token;
        }
    }

    /// The deposit address of (payout, salt): where `collect` creates that deposit's Forwarder.
    function depositAddress(address payout, bytes32 salt) external view returns (address) {
        bytes32 codeHash = keccak256(abi.encodePacked(type(Forwarder).creationCode, uint256(uint160(payout))));
        return address(uint160(uint256(keccak256(abi.encodePacked(bytes1(0xff), address(this), salt, codeHash)))));
    }
}

/// Lives only during its creating transaction: moves what its address holds to `payout`, then
/// self-destructs (the gas coin goes with SELFDESTRUCT, which no payout contract can refuse).
contract Forwarder {
    constructor(address payable payout) {
        address[] memory list = ForwarderFactory(msg.sender).tokens();
        for (uint256 i = 0; i < list.length; i++) {
            uint256 amount = balanceOf(list[i]);
            if (amount != 0) transfer(list[i], payout, amount);
        }
        selfdestruct(payout);
    }

    /// This address's balance of `token`; 0 when the call fails or answers less than a word.
    function balanceOf(address token) private view returns (uint256 amount) {
        assembly ("memory-safe") {
            mstore(0, 0x70a08231) // balanceOf(address)
            mstore(0x20, address())
            let ok := staticcall(gas(), token, 28, 0x24, 0, 0x20)
            if and(ok, gt(returndatasize(), 0x1f)) {
                amount := mload(0)
            }
        }
    }

    /// transfer(payout, amount) whatever the token answers: a token that returns nothing (USDT) is
    /// moved; one that reverts or returns false keeps its balance here for a later collection.
    function transfer(address token, address payout, uint256 amount) private {
        assembly ("memory-safe") {
            let p := mload(0x40)
            mstore(p, 0xa9059cbb) // transfer(address,uint256)
            mstore(add(p, 0x20), payout)
            mstore(add(p, 0x40), amount)
            pop(call(gas(), token, 0, add(p, 28), 0x44, 0, 0))
        }
    }
}
