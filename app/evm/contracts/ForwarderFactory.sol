// SPDX-License-Identifier: MIT
// The payout mode's deposit addresses (docs/payments.md, "The forwarder contract").
//
// A process's deposit address is the CREATE2 address of (this factory, the process's salt, the
// Forwarder's creation code followed by abi.encode(payout)). Nothing is deployed when the address
// is handed out. `collect` creates the Forwarder there: its constructor moves the listed tokens'
// balances and the gas coin to the payout address it was made for and self-destructs in the same
// transaction, so (EIP-6780) the address is empty again and a later payment is collected the same
// way. No owner, no storage, no admin function: whoever calls with whatever arguments, money at an
// address can only go to the payout address written in that address's own creation code.
// The second version: its Forwarder also logs the gas coin it moves (ForwarderFactory-v1.sol is the
// first, kept for the deposit addresses made with it).
pragma solidity 0.8.26;

interface IERC20 {
    function balanceOf(address holder) external view returns (uint256);
    function transfer(address to, uint256 amount) external returns (bool);
}

contract ForwarderFactory {
    error Reentered();
    error CreationFailed(address payout, bytes32 salt);

    /// One payout address and the salts of its deposit addresses.
    struct Payout {
        address payout;
        bytes32[] salts;
    }

    // Transient storage while `collect` runs: slot 0 holds the token count + 1 (so non-zero while
    // running, even with no token), slot 1 + i the i-th token. Each Forwarder's constructor reads the
    // list back through `tokens()`: it is not part of the creation code, so not of the address.
    uint256 private constant RUNNING = 0;

    /// Moves every listed token's balance, and the gas coin, out of each deposit address to its payout
    /// address. Anyone may call it: the arguments choose which addresses are emptied, never where the
    /// money goes. A token whose balanceOf or transfer fails (reverts, returns false) stays where it
    /// is; the other tokens and addresses are collected. A deposit address may appear once per call.
    function collect(address[] calldata tokens_, Payout[] calldata payouts) external {
        uint256 running;
        assembly {
            running := tload(RUNNING)
        }
        if (running != 0) revert Reentered();
        assembly {
            tstore(RUNNING, add(tokens_.length, 1))
        }
        for (uint256 i = 0; i < tokens_.length; i++) {
            address token = tokens_[i];
            assembly {
                tstore(add(i, 1), token)
            }
        }
        bytes memory initCode = abi.encodePacked(type(Forwarder).creationCode, uint256(0));
        for (uint256 i = 0; i < payouts.length; i++) {
            address payout = payouts[i].payout;
            bytes32[] calldata salts = payouts[i].salts;
            assembly ("memory-safe") {
                // the last word of the init code is the constructor's argument: the payout address
                mstore(add(initCode, mload(initCode)), payout)
            }
            for (uint256 j = 0; j < salts.length; j++) {
                bytes32 salt;
                address created;
                assembly ("memory-safe") {
                    salt := calldataload(add(salts.offset, shl(5, j)))
                    created := create2(0, add(initCode, 0x20), mload(initCode), salt)
                }
                if (created == address(0)) revert CreationFailed(payout, salt);
            }
        }
        assembly {
            tstore(RUNNING, 0)
        }
    }

    /// The token list of the `collect` call running now (empty outside one), ABI-encoded.
    function tokens() external view returns (address[] memory) {
        assembly {
            let count := tload(RUNNING)
            if count {
                count := sub(count, 1)
            }
            mstore(0, 0x20)
            mstore(0x20, count)
            for { let i := 0 } lt(i, count) { i := add(i, 1) } {
                mstore(add(0x40, shl(5, i)), tload(add(i, 1)))
            }
            return(0, add(0x40, shl(5, count)))
        }
    }

    /// The deposit address of (payout, salt): where `collect` creates that deposit's Forwarder.
    function depositAddress(address payout, bytes32 salt) external view returns (address) {
        bytes32 codeHash = keccak256(abi.encodePacked(type(Forwarder).creationCode, uint256(uint160(payout))));
        return address(uint160(uint256(keccak256(abi.encodePacked(bytes1(0xff), address(this), salt, codeHash)))));
    }
}

/// Lives only during its creating transaction: moves what its address holds to the payout address,
/// then self-destructs (the gas coin goes with SELFDESTRUCT, which no payout contract can refuse).
/// Its init code is this creation code followed by one word, abi.encode(payout): the payout address
/// is read from there (the constructor's only argument, read directly rather than ABI-decoded), so
/// it is part of the CREATE2 address. Payable only to spare the value check: the factory sends none.
/// The gas coin it sends is logged from the deposit address itself, as one anonymous log whose data
/// is the amount in wei (the only log this address ever emits): a collection's record of the gas
/// coin is what this transaction moved, never a balance difference across its block.
contract Forwarder {
    constructor() payable {
        assembly {
            codecopy(0, sub(codesize(), 0x20), 0x20)
            let payout := mload(0)
            // list := ForwarderFactory(msg.sender).tokens(): [0x20, count, token 0, token 1, ...].
            // Each selector is written as the low 4 bytes of a word and the call's input starts 28
            // bytes in, so no shift is spent on it.
            mstore(0, 0x9d63848a) // tokens()
            if iszero(staticcall(gas(), caller(), 0x1c, 4, 0, 0)) {
                revert(0, 0)
            }
            let list := mload(0x40)
            returndatacopy(list, 0, returndatasize())
            let count := 0
            if gt(returndatasize(), 0x3f) {
                count := mload(add(list, 0x20))
            }
            let args := add(list, returndatasize()) // room for the calls' arguments
            for { let i := 0 } lt(i, count) { i := add(i, 1) } {
                let token := mload(add(list, add(0x40, shl(5, i))))
                // balanceOf(this); a failed call or an answer shorter than a word: nothing to move
                mstore(args, 0x70a08231)
                mstore(add(args, 0x20), address())
                let ok := staticcall(gas(), token, add(args, 0x1c), 0x24, 0, 0x20)
                if and(ok, gt(returndatasize(), 0x1f)) {
                    let amount := mload(0)
                    if amount {
                        // transfer(payout, amount), whatever it answers: a token that returns nothing
                        // (USDT) moves; one that reverts or returns false keeps its balance here for a
                        // later collection, and the other tokens still move.
                        mstore(args, 0xa9059cbb)
                        mstore(add(args, 0x20), payout)
                        mstore(add(args, 0x40), amount)
                        pop(call(gas(), token, 0, add(args, 0x1c), 0x44, 0, 0))
                    }
                }
            }
            let coin := selfbalance()
            if coin {
                mstore(0, coin)
                log0(0, 0x20)
            }
            selfdestruct(payout)
        }
    }
}
