// SPDX-License-Identifier: MIT
// A contract anyone could deploy to spam deposit addresses: it emits logs in the place of ERC-20
// Transfers that are none (an ERC-721 shape, an unpadded address, data of two words), well-formed
// Transfers of amounts it never held, and answers symbol() and decimals() as its owner sets them:
// garbage bytes, a revert, or all its gas burnt. The watcher must never fail a poll for it
// (tests/chain/test_wrong_way.py); `spray` makes the reconcile benchmark's transfers in bulk.
pragma solidity ^0.8.20;

contract OddToken {
    event Transfer(address indexed from, address indexed to, uint256 value);

    enum Mode {Answer, Revert, Burn}

    Mode public mode;
    bytes public symbolAnswer;
    bytes public decimalsAnswer;

    function setAnswers(Mode mode_, bytes calldata symbol_, bytes calldata decimals_) external {
        mode = mode_;
        symbolAnswer = symbol_;
        decimalsAnswer = decimals_;
    }

    function symbol() external view {
        _answer(symbolAnswer);
    }

    function decimals() external view {
        _answer(decimalsAnswer);
    }

    function _answer(bytes memory answer) internal view {
        if (mode == Mode.Revert) revert("odd");
        if (mode == Mode.Burn) {
            uint256 i = gasleft();
            while (i > 0) i = gasleft();  // runs until the call's gas is gone
        }
        assembly {
            return(add(answer, 32), mload(answer))
        }
    }

    // A log of any shape: topics and data as given.
    function emitRaw(bytes32[] calldata topics, bytes calldata data) external {
        bytes memory body = data;
        uint256 n = topics.length;
        require(n <= 4, "topics");
        bytes32 t0 = n > 0 ? topics[0] : bytes32(0);
        bytes32 t1 = n > 1 ? topics[1] : bytes32(0);
        bytes32 t2 = n > 2 ? topics[2] : bytes32(0);
        bytes32 t3 = n > 3 ? topics[3] : bytes32(0);
        assembly {
            let p := add(body, 32)
            let len := mload(body)
            switch n
            case 0 { log0(p, len) }
            case 1 { log1(p, len, t0) }
            case 2 { log2(p, len, t0, t1) }
            case 3 { log3(p, len, t0, t1, t2) }
            default { log4(p, len, t0, t1, t2, t3) }
        }
    }

    // One well-formed Transfer of `value` from the caller to each recipient (no balances).
    function spray(address[] calldata to, uint256 value) external {
        for (uint256 i = 0; i < to.length; i++) {
            emit Transfer(msg.sender, to[i], value);
        }
    }
}
